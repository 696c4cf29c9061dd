#include "shm/fd_passing.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace zephon::shm {
namespace {

// Longest single poll: a wait re-checks its deadline at least this often.
constexpr absl::Duration kMaxPoll = absl::Milliseconds(100);

absl::Status Errno(const std::string& what) {
  const int err = errno;
  const std::string msg = absl::StrCat(what, ": ", std::strerror(err));
  switch (err) {
    case ECONNREFUSED: case ENOENT: case EPIPE: case ECONNRESET: case ENOTCONN:
      return absl::UnavailableError(msg);
    case EACCES: case EPERM:
      return absl::PermissionDeniedError(msg);
    default:
      return absl::InternalError(msg);
  }
}

// Waits until `events` are ready on `fd` or the deadline passes.
absl::Status WaitFor(int fd, short events, absl::Time deadline, std::string_view what) {
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat("timed out ", std::string(what)));
    }
    pollfd p{fd, events, 0};
    const int ms = static_cast<int>(
        std::max<int64_t>(1, absl::ToInt64Milliseconds(std::min(left, kMaxPoll))));
    const int rc = poll(&p, 1, ms);
    if (rc > 0) return absl::OkStatus();  // ready, or error/hangup: the call reports it
    if (rc < 0 && errno != EINTR) return Errno(absl::StrCat("poll while ", std::string(what)));
  }
}

}  // namespace

std::string HandoffSocketPath(const std::string& socket_path) {
  return socket_path + ".fds";
}

absl::Status SendWithFds(int socket_fd, std::string_view bytes, absl::Span<const int> fds,
                         absl::Time deadline) {
  if (bytes.empty() || fds.size() > kMaxPassedFds) {
    return absl::InvalidArgumentError("SendWithFds: empty message or too many fds");
  }
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  }
  while (true) {
    if (absl::Status s = WaitFor(socket_fd, POLLOUT, deadline, "sending descriptors");
        !s.ok()) {
      return s;
    }
    const ssize_t n = sendmsg(socket_fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(bytes.size())) return absl::OkStatus();
    if (n >= 0) return absl::InternalError("sendmsg sent a partial datagram");
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return Errno("sendmsg(SCM_RIGHTS)");
    }
  }
}

absl::StatusOr<ReceivedMessage> ReceiveWithFds(int socket_fd, size_t max_bytes,
                                               size_t max_fds, absl::Time deadline) {
  max_fds = std::min(max_fds, kMaxPassedFds);
  std::string buffer(max_bytes + 1, '\0');  // one spare byte detects an oversized datagram
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)] = {};
  while (true) {
    if (absl::Status s = WaitFor(socket_fd, POLLIN, deadline, "waiting for descriptors");
        !s.ok()) {
      return s;
    }
    iovec iov{buffer.data(), buffer.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = recvmsg(socket_fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return Errno("recvmsg(SCM_RIGHTS)");
    }
    // Take ownership of whatever arrived before judging it, so nothing leaks.
    ReceivedMessage out;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        out.fds.emplace_back(fd);
      }
    }
    if (n == 0) return absl::UnavailableError("the peer closed the socket without replying");
    if (static_cast<size_t>(n) > max_bytes || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) ||
        out.fds.size() > max_fds) {
      return absl::InvalidArgumentError(absl::StrCat(
          "oversized message (", n, " bytes, ", out.fds.size(), " descriptors; at most ",
          max_bytes, " and ", max_fds, ")"));
    }
    buffer.resize(static_cast<size_t>(n));
    out.bytes = std::move(buffer);
    return out;
  }
}

absl::StatusOr<RingFds> ClaimRingFds(const std::string& handoff_path, std::string_view token,
                                     absl::Time deadline) {
  sockaddr_un addr{};
  if (handoff_path.empty() || handoff_path.size() >= sizeof(addr.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ring hand-off socket path '", handoff_path, "' is empty or longer than ",
        sizeof(addr.sun_path) - 1, " bytes"));
  }
  if (token.empty() || token.size() > kMaxTokenBytes) {
    return absl::InvalidArgumentError("ring hand-off token is empty or too long");
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, handoff_path.data(), handoff_path.size());
  UniqueFd sock(socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!sock.valid()) return Errno("socket(AF_UNIX, SOCK_SEQPACKET)");
  while (connect(sock.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno == EINTR) continue;
    if (errno == EAGAIN && absl::Now() < deadline) {  // backlog full: the daemon is busy
      absl::SleepFor(absl::Milliseconds(10));
      continue;
    }
    absl::Status s = Errno(absl::StrCat("connecting to zephond's ring hand-off socket ",
                                        handoff_path));
    if (absl::IsUnavailable(s)) {
      return absl::UnavailableError(absl::StrCat(
          s.message(), " (it sits next to the daemon socket; is zephond older than ring "
          "layout 2, or is the socket directory not shared with this container?)"));
    }
    return s;
  }
  if (absl::Status s = SendWithFds(sock.get(), token, {}, deadline); !s.ok()) return s;
  absl::StatusOr<ReceivedMessage> reply = ReceiveWithFds(sock.get(), 1024, 2, deadline);
  if (!reply.ok()) {
    return absl::Status(reply.status().code(),
                        absl::StrCat("ring hand-off from ", handoff_path, ": ",
                                     reply.status().message()));
  }
  if (reply->bytes == "OK" && reply->fds.size() == 2) {
    return RingFds{std::move(reply->fds[0]), std::move(reply->fds[1])};
  }
  // "ERR <code> <message>"
  const std::string_view text = reply->bytes;
  int code = 0;
  const size_t space = text.find(' ', 4);
  if (text.substr(0, 4) == "ERR " && space != std::string_view::npos &&
      absl::SimpleAtoi(std::string(text.substr(4, space - 4)), &code) && code > 0 && code <= 16) {
    return absl::Status(static_cast<absl::StatusCode>(code),
                        absl::StrCat("zephond refused the ring hand-off: ", std::string(text.substr(space + 1))));
  }
  return absl::InternalError(absl::StrCat("malformed ring hand-off reply from ", handoff_path,
                                          " (", text.size(), " bytes, ", reply->fds.size(),
                                          " descriptors)"));
}

}  // namespace zephon::shm
