#include "daemon/checkpoint/peer_auth.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <vector>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/digest.h"

namespace zephon::checkpoint {
namespace {

constexpr size_t kMinSecretBytes = 32;
constexpr size_t kMaxSecretBytes = 4096;
constexpr size_t kNonceBytes = 16;
// Bounds the replay cache whatever the call rate (~100 B an entry).
constexpr size_t kMaxRememberedNonces = 1 << 20;

// Deterministic bytes of `message`: both sides of a call run the same serializer, so a
// map's order cannot make an honest signature fail.
std::string Canonical(const google::protobuf::Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    message.SerializeToCodedStream(&coded);
  }
  return out;
}

std::string RequestText(absl::string_view method, absl::string_view unix_ms,
                        absl::string_view nonce, const google::protobuf::Message& request) {
  return absl::StrCat("zephon-peer-v1\n", method, "\n", unix_ms, "\n", nonce, "\n",
                      Sha256(Canonical(request)));
}

std::string ReplyText(absl::string_view nonce, const google::protobuf::Message& response) {
  return absl::StrCat("zephon-peer-reply-v1\n", nonce, "\n", Sha256(Canonical(response)));
}

bool EqualConstantTime(absl::string_view a, absl::string_view b) {
  return a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string NewNonce() {
  unsigned char bytes[kNonceBytes];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    // OpenSSL's generator failing is not recoverable in any useful way; a nonce from
    // the clock still differs per call, which is all the server's replay check needs.
    const int64_t now = absl::ToUnixNanos(absl::Now());
    std::memcpy(bytes, &now, sizeof(now));
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes), sizeof(bytes)));
}

absl::Status Unauthenticated(absl::string_view what) {
  return absl::UnauthenticatedError(absl::StrCat(
      "peer call refused: ", what,
      " (every zephond of a cluster needs the same --peer-secret-file; clocks within the "
      "allowed skew)"));
}

}  // namespace

absl::StatusOr<std::shared_ptr<const PeerAuthenticator>> PeerAuthenticator::FromFile(
    const std::string& path, PeerAuthOptions options) {
  // Open first, then check what was opened (no window between the check and the read).
  // Links are followed on purpose: Kubernetes mounts Secrets through symlinks.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    const int err = errno;
    const std::string what = absl::StrCat("--peer-secret-file ", path, ": ", std::strerror(err));
    return err == EACCES ? absl::PermissionDeniedError(what) : absl::NotFoundError(what);
  }
  const absl::Cleanup close_fd = [fd] { ::close(fd); };
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--peer-secret-file ", path, " is not a regular file"));
  }
  if ((st.st_mode & (S_IROTH | S_IWOTH | S_IWGRP)) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "--peer-secret-file %s is readable or writable by other users (mode %04o): chmod "
        "0400 it (Kubernetes: defaultMode: 0400 on the Secret volume)",
        path, st.st_mode & 07777));
  }
  std::string text(kMaxSecretBytes + 256, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::PermissionDeniedError(absl::StrCat(
          "--peer-secret-file ", path, ": cannot be read: ", std::strerror(errno)));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  text.resize(got);
  absl::StatusOr<std::shared_ptr<const PeerAuthenticator>> auth =
      FromSecret(text, std::move(options));
  if (!auth.ok()) {
    return absl::Status(auth.status().code(), absl::StrCat("--peer-secret-file ", path, ": ",
                                                           auth.status().message()));
  }
  return auth;
}

absl::StatusOr<std::shared_ptr<const PeerAuthenticator>> PeerAuthenticator::FromSecret(
    std::string secret, PeerAuthOptions options) {
  const std::string trimmed(absl::StripAsciiWhitespace(secret));
  if (trimmed.size() < kMinSecretBytes || trimmed.size() > kMaxSecretBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the peer secret has ", trimmed.size(), " bytes; it needs ", kMinSecretBytes, " to ",
        kMaxSecretBytes, " (e.g. `openssl rand -hex 32`)"));
  }
  return std::shared_ptr<const PeerAuthenticator>(new PeerAuthenticator(trimmed, options));
}

std::string PeerAuthenticator::Mac(absl::string_view data) const {
  return absl::BytesToHexString(HmacSha256(secret_, data));
}

std::string PeerAuthenticator::HeaderFor(absl::string_view method,
                                         const google::protobuf::Message& request,
                                         int64_t unix_ms, absl::string_view nonce) const {
  const std::string ms = absl::StrCat(unix_ms);
  return absl::StrCat("v1 ", ms, " ", nonce, " ", Mac(RequestText(method, ms, nonce, request)));
}

std::string PeerAuthenticator::Sign(grpc::ClientContext* context, absl::string_view method,
                                    const google::protobuf::Message& request) const {
  std::string nonce = NewNonce();
  context->AddMetadata(kPeerAuthHeader,
                       HeaderFor(method, request, absl::ToUnixMillis(env_->Now()), nonce));
  return nonce;
}

absl::Status PeerAuthenticator::VerifyReply(const grpc::ClientContext& context,
                                            absl::string_view nonce,
                                            const google::protobuf::Message& response) const {
  const auto& trailers = context.GetServerTrailingMetadata();
  auto it = trailers.find(kPeerAuthReplyHeader);
  if (it == trailers.end()) {
    return absl::UnauthenticatedError(
        "the peer's answer is not signed: it does not hold this cluster's --peer-secret-file "
        "(or runs without one)");
  }
  const absl::string_view got(it->second.data(), it->second.size());
  if (!EqualConstantTime(got, Mac(ReplyText(nonce, response)))) {
    return absl::UnauthenticatedError(
        "the peer's answer carries a wrong signature: it holds another --peer-secret-file");
  }
  return absl::OkStatus();
}

bool PeerAuthenticator::Remember(const std::string& nonce, absl::Time now) const {
  absl::MutexLock lock(&mu_);
  while (!recent_.empty() &&
         (recent_.front().first < now - 2 * max_skew_ || recent_.size() >= kMaxRememberedNonces)) {
    recent_set_.erase(recent_.front().second);
    recent_.pop_front();
  }
  if (!recent_set_.insert(nonce).second) return false;
  recent_.emplace_back(now, nonce);
  return true;
}

absl::Status PeerAuthenticator::Verify(const grpc::ServerContext& context,
                                       absl::string_view method,
                                       const google::protobuf::Message& request,
                                       std::string* nonce_out) const {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find(kPeerAuthHeader);
  if (it == metadata.end()) return Unauthenticated("the call carries no x-zephon-auth signature");
  const absl::string_view header(it->second.data(), it->second.size());
  std::vector<absl::string_view> parts = absl::StrSplit(header, ' ');
  int64_t unix_ms = 0;
  if (parts.size() != 4 || parts[0] != "v1" || !absl::SimpleAtoi(parts[1], &unix_ms) ||
      parts[2].size() != 2 * kNonceBytes) {
    return Unauthenticated("malformed x-zephon-auth header");
  }
  const std::string expected = Mac(RequestText(method, parts[1], parts[2], request));
  if (!EqualConstantTime(parts[3], expected)) {
    return Unauthenticated("wrong signature (another secret, or the request was altered)");
  }
  const absl::Time now = env_->Now();
  const absl::Duration skew = absl::AbsDuration(now - absl::FromUnixMillis(unix_ms));
  if (skew > max_skew_) {
    return Unauthenticated(absl::StrCat("the signature is ", absl::FormatDuration(skew),
                                        " away from this daemon's clock (allowed ",
                                        absl::FormatDuration(max_skew_), ")"));
  }
  std::string nonce(parts[2]);
  if (!Remember(nonce, now)) return Unauthenticated("a replayed request (nonce already used)");
  if (nonce_out != nullptr) *nonce_out = std::move(nonce);
  return absl::OkStatus();
}

void PeerAuthenticator::SignReply(grpc::ServerContext* context, absl::string_view nonce,
                                  const google::protobuf::Message& response) const {
  context->AddTrailingMetadata(kPeerAuthReplyHeader, Mac(ReplyText(nonce, response)));
}

}  // namespace zephon::checkpoint
