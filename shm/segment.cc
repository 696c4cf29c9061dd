#include "shm/segment.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010  // Linux 5.1; older glibc headers lack the name
#endif

namespace zephon::shm {
namespace {

// memfd_create's limit: 249 bytes plus the "memfd:" prefix.
constexpr size_t kMaxNameBytes = 249;

absl::Status ErrnoStatus(int err, const std::string& what) {
  const std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ENOENT: return absl::NotFoundError(msg);
    case EEXIST: return absl::AlreadyExistsError(msg);
    case EACCES: case EPERM: return absl::PermissionDeniedError(msg);
    case ENOSPC: case ENOMEM: return absl::ResourceExhaustedError(msg);
    case EINVAL: case ENAMETOOLONG: return absl::InvalidArgumentError(msg);
    default: return absl::InternalError(msg);
  }
}

std::string HumanBytes(uint64_t bytes) {
  return absl::StrFormat("%d bytes (%.1f MiB)", bytes, bytes / (1024.0 * 1024.0));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Segment>> Segment::Create(const std::string& name,
                                                         uint64_t bytes, Env* env) {
  if (name.empty() || name.size() > kMaxNameBytes || name.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring segment name '", name, "' must be 1-249 bytes without '/'"));
  }
  if (bytes == 0) return absl::InvalidArgumentError("ring segment size must be nonzero");
  absl::StatusOr<int> created = env->CreateMemfd(name);
  if (!created.ok()) {
    if (!absl::IsResourceExhausted(created.status())) return created.status();
    return absl::ResourceExhaustedError(absl::StrCat(
        "ring segment ", name, ": ", created.status().message(),
        ". Each ring holds two descriptors in zephond and in every reader: raise the "
        "open-file limit (ulimit -n, systemd LimitNOFILE=) or the memory limit of "
        "zephond's cgroup, or run fewer instances"));
  }
  UniqueFd fd(*created);
  // Owner-only: a reader of another uid cannot reopen its read-only fd writable through
  // /proc/self/fd (memfds start out 0777).
  if (fchmod(fd.get(), 0600) != 0) return ErrnoStatus(errno, absl::StrCat("fchmod(", name, ")"));
  if (ftruncate(fd.get(), static_cast<off_t>(bytes)) != 0) {
    return ErrnoStatus(errno, absl::StrCat("ftruncate(", name, ", ", bytes, ")"));
  }
  int rc;
  do {
    rc = posix_fallocate(fd.get(), 0, static_cast<off_t>(bytes));
  } while (rc == EINTR);
  if (rc == ENOSPC || rc == ENOMEM) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "ring segment ", name, " needs ", HumanBytes(bytes),
        " of shared memory but the kernel refused it (", std::strerror(rc),
        "). Rings are memfds: they count against the memory limit of zephond's cgroup "
        "(container memory limit), not against /dev/shm. Fix: raise that limit, lower "
        "--max-ring-bytes, or shrink the ring (fewer slots or smaller batches)."));
  }
  if (rc != 0) return ErrnoStatus(rc, absl::StrCat("posix_fallocate(", name, ")"));
  // Size seals before the first mapping exists: from here on no holder of any fd of this
  // memfd can change its size, so no mapping of it can ever fault past the end.
  if (fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) {
    return ErrnoStatus(errno, absl::StrCat("fcntl(", name, ", F_ADD_SEALS shrink|grow)"));
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (data == MAP_FAILED) return ErrnoStatus(errno, absl::StrCat("mmap(", name, ")"));
  return std::unique_ptr<Segment>(
      new Segment(name, std::move(fd), static_cast<uint8_t*>(data), bytes));
}

absl::StatusOr<std::unique_ptr<Segment>> Segment::Map(UniqueFd fd, const std::string& name,
                                                      Access access) {
  if (!fd.valid()) return absl::InvalidArgumentError(absl::StrCat("segment ", name, ": no fd"));
  const int seals = fcntl(fd.get(), F_GET_SEALS);
  if (seals < 0 || (seals & F_SEAL_SHRINK) == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "segment ", name, " is not sealed against shrinking (",
        seals < 0 ? std::strerror(errno) : absl::StrFormat("seals 0x%x", seals),
        "); refusing to map it, since a shrink would kill this process with SIGBUS. "
        "Is the daemon older than ring layout 2? Upgrade it."));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, absl::StrCat("fstat(", name, ")"));
  if (st.st_size <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("segment ", name, " is empty"));
  }
  const uint64_t bytes = static_cast<uint64_t>(st.st_size);
  const int prot = access == Access::kReadWrite ? PROT_READ | PROT_WRITE : PROT_READ;
  void* data = mmap(nullptr, bytes, prot, MAP_SHARED, fd.get(), 0);
  if (data == MAP_FAILED) return ErrnoStatus(errno, absl::StrCat("mmap(", name, ")"));
  return std::unique_ptr<Segment>(
      new Segment(name, std::move(fd), static_cast<uint8_t*>(data), bytes));
}

absl::Status Segment::Seal(bool forbid_new_writers) {
  if (forbid_new_writers && fcntl(fd_.get(), F_ADD_SEALS, F_SEAL_FUTURE_WRITE) != 0) {
    return ErrnoStatus(errno, absl::StrCat("fcntl(", name_, ", F_ADD_SEALS future-write)"));
  }
  if (fcntl(fd_.get(), F_ADD_SEALS, F_SEAL_SEAL) != 0) {
    return ErrnoStatus(errno, absl::StrCat("fcntl(", name_, ", F_ADD_SEALS seal)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> Segment::OpenReadOnly() const {
  const std::string path = absl::StrCat("/proc/self/fd/", fd_.get());
  UniqueFd ro(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!ro.valid()) {
    return ErrnoStatus(errno, absl::StrCat("reopening ring segment ", name_, " read-only (",
                                           path, "; is /proc mounted?)"));
  }
  return ro;
}

absl::StatusOr<UniqueFd> Segment::Dup() const {
  UniqueFd copy(fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
  if (!copy.valid()) return ErrnoStatus(errno, absl::StrCat("dup(", name_, ")"));
  return copy;
}

absl::StatusOr<int> Segment::SweepPrefix(std::string_view prefix, const std::string& shm_dir,
                                         Env* env) {
  if (!prefix.empty() && prefix[0] == '/') prefix.remove_prefix(1);
  if (prefix.empty() || prefix.find('/') != std::string_view::npos) {
    return absl::InvalidArgumentError("sweep prefix must be nonempty and contain no '/'");
  }
  absl::StatusOr<std::vector<std::string>> names = env->ListDirectory(shm_dir);
  if (!names.ok()) return names.status();
  int removed = 0;
  for (const std::string& entry_name : *names) {
    if (std::string_view(entry_name).substr(0, prefix.size()) != prefix) continue;
    // For /dev/shm, unlinking the listed name is exactly shm_unlink.
    if (env->RemoveFile(absl::StrCat(shm_dir, "/", entry_name)).ok()) ++removed;
  }
  return removed;
}

Segment::~Segment() { munmap(data_, size_); }

}  // namespace zephon::shm
