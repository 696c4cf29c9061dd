// One zephond per socket: an exclusive flock on "<socket>.lock", held for the daemon's
// whole life. The kernel drops it when the process dies (even on SIGKILL), so a stale
// lock file never blocks a restart. Single-owner; copying deleted.
#ifndef ZEPHON_DAEMON_DAEMON_LOCK_H_
#define ZEPHON_DAEMON_DAEMON_LOCK_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace zephon::daemon {

class DaemonLock {
 public:
  // ALREADY_EXISTS when another live process holds the lock. FAILED_PRECONDITION when
  // `path` is a symlink, a hard link, not a regular file or owned by another uid (it is
  // opened with O_NOFOLLOW; see common/owned_path.h); the errno's code otherwise.
  static absl::StatusOr<std::unique_ptr<DaemonLock>> Acquire(const std::string& path);
  ~DaemonLock();
  DaemonLock(const DaemonLock&) = delete;
  DaemonLock& operator=(const DaemonLock&) = delete;

 private:
  explicit DaemonLock(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_DAEMON_LOCK_H_
