// PeerAuth: authenticates daemon-to-daemon calls (ZephonPeer.Report and Zephon.Status on
// --peer-address) with a secret shared by the daemons of a cluster (--peer-secret-file,
// e.g. a Kubernetes Secret), for clusters without mutual TLS.
//
// Every request carries the metadata entry `x-zephon-auth`:
//     v1 <unix_ms> <nonce: 32 hex> <HMAC-SHA256 hex>
// over "zephon-peer-v1\n" method "\n" unix_ms "\n" nonce "\n" SHA-256(request), the
// request serialized deterministically. The server recomputes it and compares in constant
// time, refuses a timestamp more than `max_skew` away from its clock, and refuses a nonce
// it has already accepted (replays) while the timestamp is still acceptable. Every answer
// carries `x-zephon-auth-reply`: an HMAC binding the response bytes to the request's
// nonce, so a follower also knows its checkpoint came from a daemon holding the secret.
//
// The secret never travels. Over plaintext an observer still reads reports and answers
// (progress counters, run ids); use mutual TLS (--peer-tls-*) where that matters. Both
// can be combined.
//
// The skew window and the replay cache's ages are on PeerAuthOptions::env's clock.
//
// Thread-safety: thread-safe. The replay cache is guarded by a mutex.
#ifndef ZEPHON_DAEMON_CHECKPOINT_PEER_AUTH_H_
#define ZEPHON_DAEMON_CHECKPOINT_PEER_AUTH_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <unordered_set>

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"

namespace zephon::checkpoint {

inline constexpr char kPeerAuthHeader[] = "x-zephon-auth";
inline constexpr char kPeerAuthReplyHeader[] = "x-zephon-auth-reply";
// Method names bound into signatures (a Report signature is no Status signature).
inline constexpr char kReportMethod[] = "ZephonPeer/Report";
inline constexpr char kStatusMethod[] = "Zephon/Status";

struct PeerAuthOptions {
  // How far a request's timestamp may be from this daemon's clock.
  absl::Duration max_skew = absl::Minutes(5);
  // The clock for signing and for the skew window; must outlive the authenticator.
  Env* env = Env::Default();
};

class PeerAuthenticator {
 public:
  // Reads the secret from `path` (a regular file after following links: Kubernetes
  // mounts Secrets through symlinks), surrounding whitespace trimmed. Errors name the
  // flag, the file and the fix: unreadable (NOT_FOUND / PERMISSION_DENIED), readable by
  // other users (PERMISSION_DENIED: chmod 0400, or defaultMode: 0400 on the Secret
  // volume), shorter than 32 bytes or longer than 4 KiB (INVALID_ARGUMENT).
  static absl::StatusOr<std::shared_ptr<const PeerAuthenticator>> FromFile(
      const std::string& path, PeerAuthOptions options = {});
  // From the secret's bytes (tests); the same length rule.
  static absl::StatusOr<std::shared_ptr<const PeerAuthenticator>> FromSecret(
      std::string secret, PeerAuthOptions options = {});

  PeerAuthenticator(const PeerAuthenticator&) = delete;
  PeerAuthenticator& operator=(const PeerAuthenticator&) = delete;

  // Client side: adds the request's signature to `context`; returns the nonce the answer
  // must be bound to (pass it to VerifyReply).
  std::string Sign(grpc::ClientContext* context, absl::string_view method,
                   const google::protobuf::Message& request) const;
  // Client side, after the call returned OK: UNAUTHENTICATED unless the server's
  // answer carries a valid reply signature for `nonce`.
  absl::Status VerifyReply(const grpc::ClientContext& context, absl::string_view nonce,
                           const google::protobuf::Message& response) const;

  // Server side: OK when the call is signed for `method` and `request` with this secret,
  // fresh and not a replay; UNAUTHENTICATED saying what failed otherwise (never which
  // byte). On success, `nonce` (when not null) receives the request's nonce for SignReply.
  absl::Status Verify(const grpc::ServerContext& context, absl::string_view method,
                      const google::protobuf::Message& request, std::string* nonce) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Server side: binds `response` to the request's `nonce` (trailing metadata: call
  // before the handler returns).
  void SignReply(grpc::ServerContext* context, absl::string_view nonce,
                 const google::protobuf::Message& response) const;

  // The header value for a request signed at `unix_ms` with `nonce` (tests: forged or
  // stale signatures).
  std::string HeaderFor(absl::string_view method, const google::protobuf::Message& request,
                        int64_t unix_ms, absl::string_view nonce) const;

 private:
  PeerAuthenticator(std::string secret, PeerAuthOptions options)
      : secret_(std::move(secret)), max_skew_(options.max_skew), env_(options.env) {}

  std::string Mac(absl::string_view data) const;
  // False when `nonce` was seen within the skew window; remembers it otherwise.
  bool Remember(const std::string& nonce, absl::Time now) const ABSL_LOCKS_EXCLUDED(mu_);

  const std::string secret_;
  const absl::Duration max_skew_;
  Env* const env_;

  mutable absl::Mutex mu_;
  // Nonces accepted within the last 2 * max_skew, oldest first.
  mutable std::deque<std::pair<absl::Time, std::string>> recent_ ABSL_GUARDED_BY(mu_);
  mutable std::unordered_set<std::string> recent_set_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_PEER_AUTH_H_
