#include "daemon/daemon_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/owned_path.h"

namespace zephon::daemon {

absl::StatusOr<std::unique_ptr<DaemonLock>> DaemonLock::Acquire(const std::string& path) {
  // Never through a symlink or into someone else's file: a planted lock would make a
  // root daemon overwrite its target with a pid.
  absl::StatusOr<int> opened = OpenOwnedFile(path, O_RDWR, 0600, geteuid());
  if (!opened.ok()) {
    return absl::Status(opened.status().code(), absl::StrCat("cannot open daemon lock: ",
                                                             opened.status().message()));
  }
  const int fd = *opened;
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
