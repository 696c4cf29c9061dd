#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace zephon {
namespace {

absl::Status ErrnoError(int err, const char* what, const std::string& path) {
  return absl::ErrnoToStatus(err, absl::StrCat(what, " ", path));
}

// write(2) until done; EINTR-safe.
int WriteAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  return WriteFileAtomically(path, bytes, AtomicWriteSteps{});
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes,
                                 const AtomicWriteSteps& steps) {
  const std::filesystem::path target(path);
  if (path.empty() || !target.has_filename()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot write \"", path,
                                                   "\": not a file path"));
  }
  std::filesystem::path dir = target.parent_path();
  if (dir.empty()) dir = ".";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoError(ec.value(), "cannot create directory", dir.string());

  std::string tmp =
      (dir / (kAtomicTempPrefix + target.filename().string() + ".XXXXXX")).string();
  // mkostemp opens with O_CREAT | O_EXCL: it never follows a symlink planted at the name,
  // and rename() below replaces a symlink at `path` rather than writing through it.
  const int fd = ::mkostemp(tmp.data(), O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, "cannot create a temporary file in", dir.string());
  auto fail = [&](int err, const char* what) {
    ::unlink(tmp.c_str());
    return ErrnoError(err, what, path);
  };
  int err = 0;
  if (::fchmod(fd, 0644) != 0) err = errno;
  if (err == 0) err = steps.write_all ? steps.write_all(fd, bytes) : WriteAll(fd, bytes);
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) return fail(err, "cannot write");
  err = steps.rename ? steps.rename(tmp, path)
                     : (::rename(tmp.c_str(), path.c_str()) != 0 ? errno : 0);
  if (err != 0) return fail(err, "cannot rename into");

  // Make the rename durable. The new file is complete either way, so a failure here is
  // reported but the file stays.
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) return ErrnoError(errno, "cannot open directory for fsync", dir.string());
  err = ::fsync(dir_fd) != 0 ? errno : 0;
  ::close(dir_fd);
  if (err != 0) return ErrnoError(err, "cannot fsync directory", dir.string());
  return absl::OkStatus();
}

}  // namespace zephon
