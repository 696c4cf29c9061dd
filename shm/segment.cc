#include "shm/segment.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstring>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zephon::shm {
namespace {

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

absl::Status ValidateName(const std::string& name) {
  if (name.size() < 2 || name[0] != '/' || name.find('/', 1) != std::string::npos ||
      name.size() > 255) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shm name '", name, "' must be '/' followed by 1-254 characters without '/'"));
  }
  return absl::OkStatus();
}

std::string HumanBytes(uint64_t bytes) {
  return absl::StrFormat("%d bytes (%.1f MiB)", bytes, bytes / (1024.0 * 1024.0));
}

// The operator's fix for a too-small shm mount; shared by the statvfs and ENOSPC paths.
absl::Status NoSpace(const std::string& name, const std::string& dir, uint64_t needed,
                     uint64_t free_bytes, std::string_view when) {
  return absl::ResourceExhaustedError(absl::StrCat(
      "shm segment ", name, " needs ", HumanBytes(needed), " but ", dir, " has ",
      HumanBytes(free_bytes), " free (", std::string(when),
      "). Fix: enlarge the shm mount (docker run --shm-size=<bytes>; Kubernetes: mount an "
      "emptyDir with medium: Memory and a sizeLimit at /dev/shm; both default to 64 MiB) "
      "or shrink the ring (fewer slots or smaller slot payload). shm pages count against "
      "the container's memory limit."));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Segment>> Segment::Create(const std::string& name,
                                                         uint64_t bytes, mode_t mode,
                                                         const SegmentOptions& options) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (bytes == 0) return absl::InvalidArgumentError("shm segment size must be nonzero");

  struct statvfs vfs;
  if (statvfs(options.shm_dir.c_str(), &vfs) != 0) {
    return ErrnoStatus(errno, absl::StrCat("statvfs(", options.shm_dir, ")"));
  }
  uint64_t free_bytes = uint64_t{vfs.f_bavail} * vfs.f_frsize;
  if (options.free_bytes_limit && *options.free_bytes_limit < free_bytes) {
    free_bytes = *options.free_bytes_limit;
  }
  if (bytes > free_bytes) {
    return NoSpace(name, options.shm_dir, bytes, free_bytes, "checked before creating");
  }

  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("shm_open(", name, ", O_CREAT|O_EXCL)"));
  absl::Cleanup close_fd = [fd] { close(fd); };
  // We created the name; any failure below must not leave it behind.
  absl::Cleanup unlink_name = [&name] { shm_unlink(name.c_str()); };

  if (options.group.has_value() && fchown(fd, static_cast<uid_t>(-1), *options.group) != 0) {
    return ErrnoStatus(errno, absl::StrCat("fchown(", name, ", group ", *options.group, ")"));
  }
  // shm_open applies the umask; the mode we were asked for is the contract.
  if (fchmod(fd, mode) != 0) return ErrnoStatus(errno, absl::StrCat("fchmod(", name, ")"));
  int rc;
  do {
    rc = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  } while (rc == EINTR);
  if (rc == ENOSPC) {
    return NoSpace(name, options.shm_dir, bytes, free_bytes, "posix_fallocate: ENOSPC");
  }
  if (rc != 0) return ErrnoStatus(rc, absl::StrCat("posix_fallocate(", name, ")"));

  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return ErrnoStatus(errno, absl::StrCat("mmap(", name, ")"));
  std::move(unlink_name).Cancel();
  return std::unique_ptr<Segment>(new Segment(name, static_cast<uint8_t*>(data), bytes));
}

absl::StatusOr<std::unique_ptr<Segment>> Segment::Open(const std::string& name) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  const int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("shm_open(", name, ")"));
  absl::Cleanup close_fd = [fd] { close(fd); };
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoStatus(errno, absl::StrCat("fstat(", name, ")"));
  if (st.st_size <= 0) {
    return absl::FailedPreconditionError(absl::StrCat("shm segment ", name, " is empty"));
  }
  const uint64_t bytes = static_cast<uint64_t>(st.st_size);
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (data == MAP_FAILED) return ErrnoStatus(errno, absl::StrCat("mmap(", name, ")"));
  return std::unique_ptr<Segment>(new Segment(name, static_cast<uint8_t*>(data), bytes));
}

absl::Status Segment::Unlink(const std::string& name) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (shm_unlink(name.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("shm_unlink(", name, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<int> Segment::SweepPrefix(std::string_view prefix, const std::string& shm_dir) {
  if (!prefix.empty() && prefix[0] == '/') prefix.remove_prefix(1);
  if (prefix.empty() || prefix.find('/') != std::string_view::npos) {
    return absl::InvalidArgumentError("sweep prefix must be nonempty and contain no '/'");
  }
  DIR* dir = opendir(shm_dir.c_str());
  if (dir == nullptr) return ErrnoStatus(errno, absl::StrCat("opendir(", shm_dir, ")"));
  absl::Cleanup close_dir = [dir] { closedir(dir); };
  int removed = 0;
  while (const dirent* entry = readdir(dir)) {
    const std::string_view entry_name(entry->d_name);
    if (entry_name.substr(0, prefix.size()) != prefix) continue;
    // unlinkat on the listed directory: for /dev/shm this is exactly shm_unlink, and it
    // keeps an injected shm_dir self-consistent.
    if (unlinkat(dirfd(dir), entry->d_name, 0) == 0) ++removed;
  }
  return removed;
}

Segment::~Segment() { munmap(data_, size_); }

}  // namespace zephon::shm
