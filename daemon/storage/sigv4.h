// How S3Store signs its requests: AWS Signature Version 4 computed by libcurl
// (CURLOPT_AWS_SIGV4, curl 7.88), plus the pieces of a request that curl 7.88 signs as
// given and so must already be canonical. Each condition below is pinned by
// sigv4_test.cc against AWS's published S3 signatures.
//   - The URL path is AwsUriEncode(path, keep_slash=true) and has no "." or ".."
//     segments (ValidateKey rejects them; curl would fold them after signing).
//   - The URL query is CanonicalQuery(): curl 7.88 signs the query string verbatim,
//     unsorted, and a valueless "?name" as "name" where AWS expects "name=".
//   - x-amz-content-sha256 is sent by us: curl 7.88 hashes only CURLOPT_POSTFIELDS, so
//     an upload would be signed as an empty body.
//   - Every entry of CURLOPT_HTTPHEADER is signed, so it holds no removal entries such
//     as "Expect:" (curl 7.88 would sign a header it does not send).
// Hashes and MACs come from common/digest.h.
//
// Thread-safety: thread-safe (pure functions; SignWithCurl touches only its handle).
#ifndef ZEPHON_DAEMON_STORAGE_SIGV4_H_
#define ZEPHON_DAEMON_STORAGE_SIGV4_H_

#include <curl/curl.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace zephon::storage {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct SigV4Credentials {
  std::string access_key;
  std::string secret_key;
  std::string session_token;  // "" when not using temporary credentials
};

// Makes `curl` sign the request it sends next for `region` and service "s3" with
// `credentials`, and appends to *headers what that signature needs from the caller:
// x-amz-content-sha256 = `payload_sha256_hex` (lowercase hex SHA-256 of the body) and,
// with a session token, x-amz-security-token. The caller sends exactly *headers (all of
// them are signed) and must not set Host, Authorization or x-amz-date (curl does).
void SignWithCurl(CURL* curl, absl::string_view region, const SigV4Credentials& credentials,
                  absl::string_view payload_sha256_hex, HeaderList* headers);

// The query string in SigV4 canonical form, to put in the URL as is: names and values
// AwsUriEncode'd ('/' encoded too), sorted by name then value, each as "name=value"
// (also when the value is ""), joined with '&'. "" for no parameters.
std::string CanonicalQuery(const HeaderList& query);

// AWS URI encoding: unreserved characters (A-Za-z0-9-._~) are kept, '/' is kept iff
// `keep_slash`, every other byte becomes %XX (uppercase hex).
std::string AwsUriEncode(absl::string_view in, bool keep_slash);

// The Content-MD5 header value for a body: base64 of its raw 16-byte MD5 (RFC 1864;
// OpenSSL EVP_md5). S3 rejects a PUT whose body does not match it with 400 BadDigest.
std::string ContentMd5Base64(absl::string_view bytes);

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_SIGV4_H_
