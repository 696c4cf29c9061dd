#include "common/env.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/atomic_file.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace zephon {
namespace {

absl::Status PathError(int err, const char* what, const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, " ", path));
}

FileStat ToFileStat(const struct stat& st) {
  FileStat out;
  out.size = static_cast<uint64_t>(st.st_size);
  out.mtime = absl::TimeFromTimespec(st.st_mtim);
  out.inode = static_cast<uint64_t>(st.st_ino);
  out.is_regular = S_ISREG(st.st_mode);
  out.is_directory = S_ISDIR(st.st_mode);
  return out;
}

// One open descriptor; the path only names it in errors.
class PosixReadableFile final : public ReadableFile {
 public:
  PosixReadableFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  ~PosixReadableFile() override { ::close(fd_); }
  PosixReadableFile(const PosixReadableFile&) = delete;
  PosixReadableFile& operator=(const PosixReadableFile&) = delete;

  absl::StatusOr<FileStat> Stat() override {
    struct stat st {};
    if (::fstat(fd_, &st) != 0) return PathError(errno, "cannot stat", path_);
    return ToFileStat(st);
  }

  absl::StatusOr<std::string> ReadAt(uint64_t offset, uint64_t length) override {
    // Never allocate more than the file holds (Get reads "the rest" as UINT64_MAX).
    ASSIGN_OR_RETURN(const FileStat st, Stat());
    const uint64_t available = offset < st.size ? st.size - offset : 0;
    std::string out(std::min(length, available), '\0');
    uint64_t done = 0;
    while (done < out.size()) {
      const ssize_t n = ::pread(fd_, out.data() + done, out.size() - done, offset + done);
      if (n < 0) {
        if (errno == EINTR) continue;
        return PathError(errno, "cannot read", path_);
      }
      if (n == 0) break;  // shrank since the fstat
      done += static_cast<uint64_t>(n);
    }
    out.resize(done);
    return out;
  }

 private:
  const int fd_;
  const std::string path_;
};

// POSIX and absl's clock; no state at all, so one instance serves every caller.
class PosixEnv final : public Env {
 public:
  absl::Time Now() override { return absl::Now(); }
  void SleepFor(absl::Duration duration) override { absl::SleepFor(duration); }

  absl::StatusOr<std::string> ReadFile(const std::string& path) override {
    return ::zephon::ReadFile(path);
  }

  absl::StatusOr<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) override {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return PathError(errno, "cannot open", path);
    return std::make_unique<PosixReadableFile>(fd, path);
  }

  absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes) override {
    return ::zephon::WriteFileAtomically(path, bytes);
  }

  absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      const int err = errno;
      if (err == ENOENT || err == ENOTDIR) {
        return absl::NotFoundError(absl::StrCat("no such directory: ", dir));
      }
      return PathError(err, "cannot list directory", dir);
    }
    const absl::Cleanup close_dir = [d] { ::closedir(d); };
    std::vector<std::string> names;
    errno = 0;
    while (const dirent* entry = ::readdir(d)) {
      const std::string_view name(entry->d_name);
      if (name != "." && name != "..") names.emplace_back(name);
    }
    if (errno != 0) return PathError(errno, "cannot list directory", dir);
    return names;
  }

  absl::Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return PathError(errno, "cannot remove", path);
    return absl::OkStatus();
  }

  absl::StatusOr<FileStat> Stat(const std::string& path) override {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      const int err = errno;
      if (err == ENOENT || err == ENOTDIR) {
        return absl::NotFoundError(absl::StrCat("no such file: ", path));
      }
      return PathError(err, "cannot stat", path);
    }
    return ToFileStat(st);
  }

  absl::StatusOr<int> CreateMemfd(const std::string& name) override {
    const int fd = ::memfd_create(name.c_str(), MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return absl::ErrnoToStatus(errno, absl::StrCat("memfd_create(", name, ")"));
    return fd;
  }
};

}  // namespace

Env* Env::Default() {
  // Leaked on purpose: components may use it from threads still running at exit.
  static Env* const env = new PosixEnv();
  return env;
}

}  // namespace zephon
