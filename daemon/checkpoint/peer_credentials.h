// Credentials for the daemon-to-daemon (ZephonPeer) channel, from --peer-tls-* flags.
//
//   nothing set            plaintext (single host, or a trusted network);
//   cert + key             server: TLS; client: TLS verifying the server against
//                          ca_file (or the system roots), presenting cert/key;
//   cert + key + ca        server: mutual TLS, clients must present a certificate
//                          signed by ca_file; client: as above.
// Every daemon of a run uses the same options, so one set of flags configures both
// sides. Certificates must name the address peers dial (SAN IP or DNS).
//
// Thread-safety: thread-safe (pure functions; files are read on each call).
#ifndef ZEPHON_DAEMON_CHECKPOINT_PEER_CREDENTIALS_H_
#define ZEPHON_DAEMON_CHECKPOINT_PEER_CREDENTIALS_H_

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/status/statusor.h"

namespace zephon::checkpoint {

struct PeerTlsOptions {
  std::string cert_file;  // PEM certificate chain of this daemon
  std::string key_file;   // PEM private key of cert_file
  std::string ca_file;    // PEM CA bundle peers' certificates must chain to

  bool enabled() const { return !cert_file.empty() || !key_file.empty() || !ca_file.empty(); }
};

// Server side. INVALID_ARGUMENT when cert_file and key_file are not given together (or
// ca_file alone: a server needs its own certificate); the read error (NOT_FOUND,
// PERMISSION_DENIED, ...) naming the flag and file when one cannot be read or is empty.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const PeerTlsOptions& options);

// Client side, matching ServerCredentials. INVALID_ARGUMENT when exactly one of
// cert_file and key_file is given; read errors as above.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const PeerTlsOptions& options);

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_PEER_CREDENTIALS_H_
