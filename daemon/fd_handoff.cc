#include "daemon/fd_handoff.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/logging.h"
#include "shm/fd_passing.h"

namespace zephon::daemon {
namespace {

std::shared_ptr<spdlog::logger> Log() { return SubsystemLogger("ring"); }

constexpr size_t kTokenBytes = 16;
constexpr int kPollMs = 100;

std::string ErrorReply(absl::StatusCode code, const std::string& message) {
  return absl::StrCat("ERR ", static_cast<int>(code), " ", message);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FdHandoff>> FdHandoff::Start(FdHandoffOptions options) {
  sockaddr_un addr{};
  if (options.socket_path.empty() || options.socket_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring hand-off socket path '", options.socket_path, "' must be 1..",
        sizeof(addr.sun_path) - 1, " bytes; use a shorter --socket"));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, options.socket_path.data(), options.socket_path.size());
  shm::UniqueFd listener(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener.valid()) {
    return absl::InternalError(absl::StrCat("socket(AF_UNIX): ", std::strerror(errno)));
  }
  unlink(options.socket_path.c_str());  // stale, from a daemon that died; the lock is ours
  // Created 0600 (umask) and only then widened to the group, so there is no window in
  // which another user could connect.
  const mode_t old_umask = umask(0177);
  const int bound = bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int bind_errno = errno;
  umask(old_umask);
  if (bound != 0) {
    return absl::Status(bind_errno == EACCES ? absl::StatusCode::kPermissionDenied
                                             : absl::StatusCode::kInternal,
                        absl::StrCat("cannot bind the ring hand-off socket ",
                                     options.socket_path, ": ", std::strerror(bind_errno)));
  }
  if (options.group.has_value()) {
    if (chown(options.socket_path.c_str(), static_cast<uid_t>(-1), *options.group) != 0 ||
        chmod(options.socket_path.c_str(), 0660) != 0) {
      const int err = errno;
      unlink(options.socket_path.c_str());
      return absl::PermissionDeniedError(absl::StrCat(
          "cannot give the ring hand-off socket ", options.socket_path, " to group ",
          *options.group, ": ", std::strerror(err)));
    }
  }
  if (listen(listener.get(), 64) != 0) {
    const int err = errno;
    unlink(options.socket_path.c_str());
    return absl::InternalError(absl::StrCat("listen(", options.socket_path, "): ",
                                            std::strerror(err)));
  }
  std::unique_ptr<FdHandoff> handoff(new FdHandoff(std::move(options), std::move(listener)));
  handoff->thread_ = std::thread([h = handoff.get()] { h->Serve(); });
  return handoff;
}

FdHandoff::~FdHandoff() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  unlink(options_.socket_path.c_str());
}

absl::StatusOr<std::string> FdHandoff::Offer(shm::RingFds fds, std::string what) {
  unsigned char raw[kTokenBytes];
  if (getrandom(raw, sizeof(raw), 0) != static_cast<ssize_t>(sizeof(raw))) {
    return absl::InternalError(absl::StrCat("getrandom for a ring hand-off token: ",
                                            std::strerror(errno)));
  }
  std::string token = absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(raw), sizeof(raw)));
  absl::MutexLock lock(&mu_);
  const absl::Time now = absl::Now();
  ExpireLocked(now);
  offers_[token] = Offered{std::move(fds), std::move(what), now + options_.token_ttl};
  return token;
}

void FdHandoff::Withdraw(const std::string& token) {
  absl::MutexLock lock(&mu_);
  offers_.erase(token);
}

size_t FdHandoff::pending() const {
  absl::MutexLock lock(&mu_);
  return offers_.size();
}

void FdHandoff::ExpireLocked(absl::Time now) {
  for (auto it = offers_.begin(); it != offers_.end();) {
    if (it->second.expires <= now) {
      Log()->warn("ring hand-off for {} was not claimed within {}; its descriptors are closed",
                  it->second.what, absl::FormatDuration(options_.token_ttl));
      it = offers_.erase(it);
    } else {
      ++it;
    }
  }
}

void FdHandoff::Serve() {
  while (!stop_.load()) {
    pollfd p{listener_.get(), POLLIN, 0};
    const int ready = poll(&p, 1, kPollMs);
    {
      absl::MutexLock lock(&mu_);
      ExpireLocked(absl::Now());
    }
    if (ready <= 0) continue;
    shm::UniqueFd conn(accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!conn.valid()) continue;  // EAGAIN (the peer gave up), EMFILE: retry next round
    HandleConnection(conn.get());
  }
}

std::string FdHandoff::RefusePeer(int fd, std::string* who) const {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    *who = "unknown peer";
    return absl::StrCat("cannot read the peer's credentials: ", std::strerror(errno));
  }
  *who = absl::StrCat("pid ", cred.pid, " uid ", cred.uid, " gid ", cred.gid);
  if (cred.uid == 0 || cred.uid == geteuid()) return "";
  if (options_.group.has_value()) {
    if (cred.gid == *options_.group) return "";
    // Supplementary groups (Linux 4.13+); a kernel without them only sees the primary gid.
    std::vector<gid_t> groups(256);
    socklen_t groups_len = groups.size() * sizeof(gid_t);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &groups_len) == 0) {
      groups.resize(groups_len / sizeof(gid_t));
      for (gid_t g : groups) {
        if (g == *options_.group) return "";
      }
    }
  }
  return absl::StrCat("uid ", cred.uid, " is neither root, zephond's uid ", geteuid(),
                      options_.group ? absl::StrCat(", nor in group ", *options_.group) : "",
                      "; run the trainer as that user or start zephond with --shm-group");
}

void FdHandoff::HandleConnection(int fd) {
  const absl::Time deadline = absl::Now() + options_.io_timeout;
  std::string who;
  const std::string refused = RefusePeer(fd, &who);
  // Read the request even from a refused peer: closing a Unix socket with unread data
  // resets the connection, and the peer would never see why it was refused.
  absl::StatusOr<shm::ReceivedMessage> request =
      shm::ReceiveWithFds(fd, shm::kMaxTokenBytes, 0, deadline);
  if (!refused.empty()) {
    Log()->warn("ring hand-off refused to {}: {}", who, refused);
    (void)shm::SendWithFds(fd, ErrorReply(absl::StatusCode::kPermissionDenied, refused), {},
                           deadline);
    return;
  }
  if (!request.ok()) {
    Log()->warn("ring hand-off from {}: no token: {}", who, request.status().ToString());
    return;
  }
  std::optional<Offered> offer;
  {
    absl::MutexLock lock(&mu_);
    ExpireLocked(absl::Now());
    auto it = offers_.find(request->bytes);
    if (it != offers_.end()) {
      offer = std::move(it->second);
      offers_.erase(it);  // single use, whether or not the send below succeeds
    }
  }
  if (!offer.has_value()) {
    Log()->warn("ring hand-off from {}: unknown, used or expired token", who);
    (void)shm::SendWithFds(fd, ErrorReply(absl::StatusCode::kNotFound,
                                          "unknown, already used or expired token; attach again"),
                           {}, deadline);
    return;
  }
  const int fds[] = {offer->fds.data.get(), offer->fds.cursors.get()};
  if (absl::Status s = shm::SendWithFds(fd, "OK", fds, deadline); !s.ok()) {
    Log()->warn("ring hand-off of {} to {} failed: {}", offer->what, who, s.ToString());
    return;
  }
  Log()->debug("ring hand-off: {} claimed by {}", offer->what, who);
}

}  // namespace zephon::daemon
