// FdHandoff: zephond's ring hand-off socket. gRPC cannot carry file descriptors, so a
// reader's ring memfds travel over a second Unix socket next to the daemon's
// (shm::HandoffSocketPath: "<socket>.fds", SOCK_SEQPACKET, same mode and group as the
// main socket). Attach registers the reader's descriptors here under a one-time random
// token returned in the AttachReply; the client connects, sends the token and receives
// the descriptors with SCM_RIGHTS (protocol: shm/fd_passing.h).
//
// Access is decided at hand-over: the socket's file mode admits only the daemon's user
// (or its --shm-group), and the peer's SO_PEERCRED uid/gid (and SO_PEERGROUPS) must be
// root, the daemon's uid, or in that group. Tokens are single-use, expire after
// `token_ttl`, and are withdrawn when their Attach stream ends.
//
// A silent or slow peer cannot delay anyone else: the serving thread poll()s the listener
// and every accepted connection together, serves each connection whose token has arrived,
// and closes one that sent none within `io_timeout` (at most 256 wait at once; beyond
// that the oldest is closed). Receiving a ready token and sending the reply wait at most
// 100 ms. When accept fails for want of descriptors or memory the loop pauses 100 ms
// instead of spinning. The loop re-checks for shutdown every 100 ms.
//
// Thread-safety: thread-safe. One serving thread; Offer/Withdraw come from gRPC threads.
#ifndef ZEPHON_DAEMON_FD_HANDOFF_H_
#define ZEPHON_DAEMON_FD_HANDOFF_H_

#include <sys/types.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "shm/segment.h"
#include "shm/unique_fd.h"

namespace zephon::daemon {

struct FdHandoffOptions {
  std::string socket_path;  // usually shm::HandoffSocketPath(<daemon socket>)
  // --shm-group: the socket becomes 0660 with this group, and peers in it are served.
  std::optional<gid_t> group;
  // How long an offer waits for its claim.
  absl::Duration token_ttl = absl::Seconds(60);
  // How long an accepted connection may take to send its token before it is closed.
  absl::Duration io_timeout = absl::Seconds(2);
  // The clock of token expiry (token_ttl); socket waits use the real clock. Must outlive
  // the FdHandoff.
  Env* env = Env::Default();
};

class FdHandoff {
 public:
  // Binds and listens on options.socket_path (replacing a stale socket there: the
  // daemon lock says it is ours), sets its mode (0600, or 0660 and the group with
  // --shm-group) before listening, starts the serving thread. Leaves the umask alone.
  // Errors: INVALID_ARGUMENT (path too long for a Unix socket), PERMISSION_DENIED /
  // INTERNAL (bind, chmod, chown failed: the message names the path).
  static absl::StatusOr<std::unique_ptr<FdHandoff>> Start(FdHandoffOptions options);
  // Stops the thread (one 100 ms poll round plus replies in flight, each <= 100 ms),
  // removes the socket, closes every unclaimed descriptor and every connection still
  // waiting for its token.
  ~FdHandoff();
  FdHandoff(const FdHandoff&) = delete;
  FdHandoff& operator=(const FdHandoff&) = delete;

  // Holds `fds` for one claim and returns its token (32 hex digits from getrandom).
  // `what` names the reader in logs ("instance ... rank ..."). Errors: INTERNAL (no
  // randomness).
  absl::StatusOr<std::string> Offer(shm::RingFds fds, std::string what) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops an unclaimed offer and closes its descriptors; no-op once claimed or expired.
  void Withdraw(const std::string& token) ABSL_LOCKS_EXCLUDED(mu_);

  const std::string& socket_path() const { return options_.socket_path; }
  // Offers not yet claimed, withdrawn or expired.
  size_t pending() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Offered {
    shm::RingFds fds;
    std::string what;
    absl::Time expires;
  };
  FdHandoff(FdHandoffOptions options, shm::UniqueFd listener)
      : options_(std::move(options)), listener_(std::move(listener)) {}

  void Serve();
  // Serves one connection whose token is ready; no wait on it outlasts `deadline`.
  void HandleConnection(int fd, absl::Time deadline);
  // Empty when the peer may claim descriptors; otherwise why not.
  std::string RefusePeer(int fd, std::string* who) const;
  void ExpireLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const FdHandoffOptions options_;
  const shm::UniqueFd listener_;

  mutable absl::Mutex mu_;
  std::map<std::string, Offered> offers_ ABSL_GUARDED_BY(mu_);

  std::atomic<bool> stop_{false};  // written by the destructor
  std::thread thread_;
};

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_FD_HANDOFF_H_
