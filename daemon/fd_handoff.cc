#include "daemon/fd_handoff.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "shm/fd_passing.h"

namespace zephon::daemon {
namespace {

std::shared_ptr<spdlog::logger> Log() { return SubsystemLogger("ring"); }

constexpr size_t kTokenBytes = 16;
constexpr int kPollMs = 100;
// Most connections waiting for their token at once; beyond it the oldest is closed.
constexpr size_t kMaxWaiting = 256;
// Pause after accept4 fails for want of descriptors or memory.
constexpr absl::Duration kAcceptBackoff = absl::Milliseconds(100);
// Bound on receiving a token that poll() reported ready and on sending the reply: the
// datagram is already queued and the reply fits the fresh socket's empty buffer, so only
// a hostile peer (shrunken buffer) could make either wait, and it must not stall others.
constexpr absl::Duration kReplyWait = absl::Milliseconds(100);

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
  // No umask games (umask is process-wide and would race with other threads creating
  // files): the socket is created with the process umask, and its final mode and group are
  // set before listen(). Until listen() a connect is refused, so there is no window in
  // which another user could connect whatever mode bind() gave it.
  if (bind(listener.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    const int err = errno;
    return absl::Status(err == EACCES ? absl::StatusCode::kPermissionDenied
                                      : absl::StatusCode::kInternal,
                        absl::StrCat("cannot bind the ring hand-off socket ",
                                     options.socket_path, ": ", std::strerror(err)));
  }
  if ((options.group.has_value() &&
       chown(options.socket_path.c_str(), static_cast<uid_t>(-1), *options.group) != 0) ||
      chmod(options.socket_path.c_str(), options.group.has_value() ? 0660 : 0600) != 0) {
    const int err = errno;
    unlink(options.socket_path.c_str());
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot set the mode/group of the ring hand-off socket ", options.socket_path,
        options.group ? absl::StrCat(" (group ", *options.group, ")") : "", ": ",
        std::strerror(err)));
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
  const absl::Time now = options_.env->Now();
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
  // Accepted connections waiting for their token, oldest first (all share io_timeout, so
  // this is also deadline order). A silent peer costs one slot until its deadline, never
  // another client's time: every ready connection is served in the same round.
  struct Waiting {
    shm::UniqueFd fd;
    absl::Time deadline;
  };
  std::vector<Waiting> waiting;
  bool accept_starved = false;  // to log an fd shortage once per stretch, not every round
  std::vector<pollfd> polls;
  while (!stop_.load()) {
    polls.clear();
    polls.push_back(pollfd{listener_.get(), POLLIN, 0});
    for (const Waiting& w : waiting) polls.push_back(pollfd{w.fd.get(), POLLIN, 0});
    int timeout_ms = kPollMs;
    // Socket I/O timeouts are real time (absl::Now(), not the Env's clock): they bound
    // poll(2) and the peer's reads, which a fake clock cannot advance. Offers expire on
    // the Env's clock (ExpireLocked).
    if (!waiting.empty()) {
      const int64_t until_first = absl::ToInt64Milliseconds(waiting.front().deadline - absl::Now());
      timeout_ms = static_cast<int>(std::clamp<int64_t>(until_first + 1, 0, kPollMs));
    }
    const int ready = poll(polls.data(), polls.size(), timeout_ms);
    const absl::Time now = absl::Now();
    {
      absl::MutexLock lock(&mu_);
      ExpireLocked(options_.env->Now());
    }
    if (ready < 0) {
      if (errno != EINTR) {
        Log()->error("ring hand-off poll: {}", std::strerror(errno));
        absl::SleepFor(kAcceptBackoff);
      }
      continue;
    }
    // Serve every connection whose token arrived (or that hung up); drop the overdue.
    std::vector<Waiting> still;
    still.reserve(waiting.size());
    for (size_t i = 0; i < waiting.size(); ++i) {
      if (polls[i + 1].revents != 0) {
        HandleConnection(waiting[i].fd.get(),
                         absl::Now() + std::min(options_.io_timeout, kReplyWait));
      } else if (waiting[i].deadline <= now) {
        Log()->warn("ring hand-off: a peer connected but sent no token within {}; closed",
                    absl::FormatDuration(options_.io_timeout));
      } else {
        still.push_back(std::move(waiting[i]));
      }
    }
    waiting = std::move(still);
    if ((polls[0].revents & POLLIN) == 0) continue;
    for (size_t n = 0; n < kMaxWaiting; ++n) {
      shm::UniqueFd conn(
          accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
      if (!conn.valid()) {
        const int err = errno;
        if (err == EMFILE || err == ENFILE || err == ENOBUFS || err == ENOMEM) {
          // The pending connection stays queued and poll() reports it ready at once:
          // without a pause this loop would spin a core until descriptors free up.
          if (!accept_starved) {
            Log()->warn("ring hand-off cannot accept: {}; retrying every {}",
                        std::strerror(err), absl::FormatDuration(kAcceptBackoff));
          }
          accept_starved = true;
          absl::SleepFor(kAcceptBackoff);
        }
        break;  // EAGAIN: queue drained; ECONNABORTED and the like: next round
      }
      accept_starved = false;
      if (waiting.size() >= kMaxWaiting) {
        // Bounded: a flood of silent connections evicts its own oldest members, and a
        // real client connecting now is served as soon as its token arrives.
        Log()->warn("ring hand-off: {} connections sent no token yet; closing the oldest",
                    waiting.size());
        waiting.erase(waiting.begin());
      }
      waiting.push_back(Waiting{std::move(conn), now + options_.io_timeout});
    }
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

void FdHandoff::HandleConnection(int fd, absl::Time deadline) {
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
    ExpireLocked(options_.env->Now());
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
