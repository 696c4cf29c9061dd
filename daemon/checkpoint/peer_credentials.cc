#include "daemon/checkpoint/peer_credentials.h"

#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/status_macros.h"

namespace zephon::checkpoint {
namespace {

// Contents of a PEM file given by `flag`; "" when the path is empty.
absl::StatusOr<std::string> ReadPem(const std::string& path, const char* flag) {
  if (path.empty()) return std::string();
  absl::StatusOr<std::string> pem = ReadFile(path);
  if (!pem.ok()) {
    return absl::Status(pem.status().code(), absl::StrCat("--", flag, ": ",
                                                          pem.status().message()));
  }
  if (pem->find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", path, " is empty or not a PEM file"));
  }
  return pem;
}

absl::Status CheckCertKeyPair(const PeerTlsOptions& options) {
  if (options.cert_file.empty() != options.key_file.empty()) {
    return absl::InvalidArgumentError(
        "--peer-tls-cert and --peer-tls-key must be given together");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerCredentials(
    const PeerTlsOptions& options) {
  if (!options.enabled()) return grpc::InsecureServerCredentials();
  RETURN_IF_ERROR(CheckCertKeyPair(options));
  if (options.cert_file.empty()) {
    return absl::InvalidArgumentError(
        "--peer-tls-ca needs --peer-tls-cert and --peer-tls-key: a TLS server presents "
        "its own certificate");
  }
  ASSIGN_OR_RETURN(std::string cert, ReadPem(options.cert_file, "peer-tls-cert"));
  ASSIGN_OR_RETURN(std::string key, ReadPem(options.key_file, "peer-tls-key"));
  ASSIGN_OR_RETURN(std::string ca, ReadPem(options.ca_file, "peer-tls-ca"));
  grpc::SslServerCredentialsOptions ssl(
      ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                 : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  ssl.pem_root_certs = std::move(ca);
  ssl.pem_key_cert_pairs.push_back({std::move(key), std::move(cert)});
  return grpc::SslServerCredentials(ssl);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ChannelCredentials(
    const PeerTlsOptions& options) {
  if (!options.enabled()) return grpc::InsecureChannelCredentials();
  RETURN_IF_ERROR(CheckCertKeyPair(options));
  grpc::SslCredentialsOptions ssl;
  ASSIGN_OR_RETURN(ssl.pem_root_certs, ReadPem(options.ca_file, "peer-tls-ca"));
  ASSIGN_OR_RETURN(ssl.pem_cert_chain, ReadPem(options.cert_file, "peer-tls-cert"));
  ASSIGN_OR_RETURN(ssl.pem_private_key, ReadPem(options.key_file, "peer-tls-key"));
  return grpc::SslCredentials(ssl);
}

}  // namespace zephon::checkpoint
