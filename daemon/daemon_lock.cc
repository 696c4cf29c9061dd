#include "daemon/daemon_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace zephon::daemon {

absl::StatusOr<std::unique_ptr<DaemonLock>> DaemonLock::Acquire(const std::string& path) {
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot open daemon lock ", path, ": ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    close(fd);
    if (err == EWOULDBLOCK) {
      return absl::AlreadyExistsError(absl::StrCat(
          "another zephond holds ", path, "; one daemon serves one socket (use another "
          "--socket to run a second daemon)"));
    }
    return absl::InternalError(absl::StrCat("flock ", path, ": ", std::strerror(err)));
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) == 0) (void)!write(fd, pid.data(), pid.size());
  return std::unique_ptr<DaemonLock>(new DaemonLock(fd));
}

DaemonLock::~DaemonLock() { close(fd_); }

}  // namespace zephon::daemon
