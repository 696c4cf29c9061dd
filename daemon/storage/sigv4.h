// AWS Signature Version 4 (header-based auth, AWS4-HMAC-SHA256) as a pure function: no
// clock, no I/O, no credentials lookup. The s3:// ObjectStore (issue 8) will feed it
// each request it sends over libcurl; tests pin it to AWS's published vectors.
//
// Canonicalization follows the S3 rules: the path is URI-encoded once, segment by
// segment ('/' kept), and not normalized (no "./", "../" or "//" folding); query names
// and values are encoded with '/' encoded too. Unreserved characters (A-Za-z0-9-._~)
// are never encoded; every other byte becomes %XX (uppercase hex).
//
// Thread-safety: thread-safe (pure functions).
#ifndef ZEPHON_DAEMON_STORAGE_SIGV4_H_
#define ZEPHON_DAEMON_STORAGE_SIGV4_H_

#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace zephon::storage {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct SigV4Request {
  std::string method;  // "GET", "PUT", ...
  // The unencoded path, starting with '/' ("/my key.txt"); it is encoded here.
  std::string path = "/";
  // Unencoded query parameters, any order; a parameter without a value has "".
  HeaderList query;
  // Headers to sign, any order and case. Must contain "host". "x-amz-date" is added
  // (= timestamp) when missing; a session token adds "x-amz-security-token".
  HeaderList headers;
  // Lowercase hex SHA-256 of the body (Sha256Hex("") for none), or "UNSIGNED-PAYLOAD".
  std::string payload_sha256_hex;
};

struct SigV4Credentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // "" when not using temporary credentials
};

struct SigV4Signature {
  std::string canonical_request;
  std::string string_to_sign;
  std::string signed_headers;  // "host;range;x-amz-date"
  std::string signature;       // 64 lowercase hex chars
  std::string authorization;   // the Authorization header's value
  // Every header that was signed, lowercase names, sorted, with trimmed values: the
  // caller sends exactly these plus Authorization (including any added x-amz-date and
  // x-amz-security-token).
  HeaderList headers;
};

// Signs `request` for `region`/`service` at `timestamp` ("yyyymmddThhmmssZ", UTC).
// INVALID_ARGUMENT (naming the field) if the timestamp is malformed, the host header,
// method, region, service or keys are missing, the path does not start with '/', or
// x-amz-date disagrees with the timestamp.
absl::StatusOr<SigV4Signature> SignV4(const SigV4Request& request, absl::string_view region,
                                      absl::string_view service,
                                      const SigV4Credentials& credentials,
                                      absl::string_view timestamp);

// AWS URI encoding (see the file comment); '/' is kept iff `keep_slash`.
std::string AwsUriEncode(absl::string_view in, bool keep_slash);

// The Content-MD5 header value for a body: base64 of its raw 16-byte MD5 (RFC 1864;
// OpenSSL EVP_md5). S3 rejects a PUT whose body does not match it with 400 BadDigest.
std::string ContentMd5Base64(absl::string_view bytes);

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_SIGV4_H_
