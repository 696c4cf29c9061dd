#include "daemon/log_file_sink.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/owned_path.h"

namespace zephon::daemon {

absl::StatusOr<std::shared_ptr<LogFileSink>> LogFileSink::Open(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  // Missing directories are created (as spdlog's file sink did), then checked. Each is
  // made exactly 0700, whatever the umask: std::filesystem::create_directories would
  // leave 0770 under systemd's UMask=0007, which the trust check below (and the socket
  // directory's private check, if the log lives there) refuses.
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string prefix = dir.substr(0, i);
    const char* failed = nullptr;
    if (::mkdir(prefix.c_str(), 0700) == 0) {
      if (::chmod(prefix.c_str(), 0700) != 0) failed = "cannot chmod 0700";
    } else if (errno != EEXIST) {
      failed = "cannot create directory";
    }
    if (failed != nullptr) {
      const int err = errno;
      return absl::Status(absl::ErrnoToStatusCode(err),
                          absl::StrCat("--log-file ", path, ": ", failed, " ", prefix, ": ",
                                       std::strerror(err)));
    }
  }
  if (absl::Status trusted = CheckTrustedPath(dir, geteuid()); !trusted.ok()) {
    return absl::Status(trusted.code(),
                        absl::StrCat("--log-file ", path, ": ", trusted.message()));
  }
  absl::StatusOr<int> fd = OpenOwnedFile(path, O_WRONLY | O_APPEND, 0600, geteuid());
  if (!fd.ok()) {
    return absl::Status(fd.status().code(),
                        absl::StrCat("--log-file: ", fd.status().message()));
  }
  return std::shared_ptr<LogFileSink>(new LogFileSink(*fd));
}

LogFileSink::~LogFileSink() { ::close(fd_); }

void LogFileSink::sink_it_(const spdlog::details::log_msg& msg) {
  spdlog::memory_buf_t formatted;
  formatter_->format(msg, formatted);
  const char* data = formatted.data();
  size_t left = formatted.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, data, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // a full disk must not stop the daemon; the line is lost
    data += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace zephon::daemon
