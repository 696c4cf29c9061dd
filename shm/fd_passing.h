// File: shm/fd_passing.h
//
// Passing file descriptors between processes over Unix SOCK_SEQPACKET sockets
// (SCM_RIGHTS), with a deadline on every wait, plus the client side of zephond's ring
// hand-off: gRPC cannot carry descriptors, so after Attach a reader connects to the
// daemon's hand-off socket (HandoffSocketPath), sends the one-time token from its
// AttachReply and receives the ring's two memfds.
//
// Hand-off protocol (one exchange per connection, one datagram each way):
//   client -> daemon: the token (at most kMaxTokenBytes bytes)
//   daemon -> client: "OK" with exactly two descriptors (data segment read-only, cursor
//                     segment read-write), or "ERR <code> <message>" with none, <code>
//                     an absl::StatusCode number.
//
// Thread safety: the functions are thread-safe; each call uses only its own socket.
#ifndef ZEPHON_SHM_FD_PASSING_H_
#define ZEPHON_SHM_FD_PASSING_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "shm/segment.h"
#include "shm/unique_fd.h"

namespace zephon::shm {

inline constexpr size_t kMaxTokenBytes = 128;
// The most descriptors one message may carry; more is a protocol error.
inline constexpr size_t kMaxPassedFds = 8;

struct ReceivedMessage {
  std::string bytes;
  std::vector<UniqueFd> fds;
};

// The hand-off socket that belongs to the daemon socket `socket_path`.
std::string HandoffSocketPath(const std::string& socket_path);

// Sends `bytes` (nonempty) and `fds` (at most kMaxPassedFds, borrowed) as one datagram on
// a connected SOCK_SEQPACKET socket. Errors: DEADLINE_EXCEEDED (the peer did not take it
// in time), UNAVAILABLE (peer gone), INVALID_ARGUMENT, INTERNAL.
absl::Status SendWithFds(int socket_fd, std::string_view bytes, absl::Span<const int> fds,
                         absl::Time deadline);

// Receives one datagram of at most `max_bytes` bytes and at most `max_fds` descriptors
// (received close-on-exec). Errors: DEADLINE_EXCEEDED, UNAVAILABLE (the peer closed
// without sending), INVALID_ARGUMENT (datagram or descriptor list too long: whatever
// arrived is closed), INTERNAL.
absl::StatusOr<ReceivedMessage> ReceiveWithFds(int socket_fd, size_t max_bytes,
                                               size_t max_fds, absl::Time deadline);

// Client side of the hand-off: connects to `handoff_path`, sends `token`, returns the
// ring's descriptors. Errors: UNAVAILABLE (nothing listens there: the message names the
// path), the daemon's refusal with its code (PERMISSION_DENIED for a peer uid/gid it does
// not serve, NOT_FOUND for an unknown, used or expired token), DEADLINE_EXCEEDED,
// INTERNAL (malformed reply).
absl::StatusOr<RingFds> ClaimRingFds(const std::string& handoff_path, std::string_view token,
                                     absl::Time deadline);

}  // namespace zephon::shm

#endif  // ZEPHON_SHM_FD_PASSING_H_
