// How S3Store (s3_store.h) reads what an S3 server answered: the HTTP answer itself
// (S3Response), the absl::Status of a non-2xx answer, the checks on a 206 answer's
// Content-Range and on the ETag of a conditional read, and the wording of a libcurl
// transport failure. The status mapping and the messages are the ones s3_store.h
// documents; every message names the operation, the object, the bucket and the
// endpoint (S3RequestContext).
//
// Thread-safety: thread-safe (pure functions over their arguments).
#ifndef ZEPHON_DAEMON_STORAGE_S3_RESPONSE_H_
#define ZEPHON_DAEMON_STORAGE_S3_RESPONSE_H_

#include <curl/curl.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "daemon/storage/sigv4.h"

namespace zephon::storage {

// One HTTP answer to an S3 request (after any retries).
struct S3Response {
  long status = 0;     // HTTP status code
  std::string body;    // the whole body (an error document for most non-2xx answers)
  HeaderList headers;  // lowercase names, trimmed values, in arrival order
  int attempts = 0;    // requests sent to get it, retries included
};

// What the error messages name about the request an answer belongs to.
struct S3RequestContext {
  std::string op;        // the HTTP method: "GET", "PUT", "HEAD", "DELETE"
  std::string object;    // "s3://bucket/key" ("s3://bucket/" for bucket-level requests)
  std::string bucket;
  std::string endpoint;  // as configured, e.g. "http://127.0.0.1:4568"
};

// The value of the first header named `name` (lowercase) in `headers`; "" when absent.
std::string S3HeaderValue(const HeaderList& headers, std::string_view name);

// The Status for a non-2xx `response`, with S3's error Code and Message (or the start of
// the body) and the attempt count: 404 NoSuchBucket -> FAILED_PRECONDITION, other 404 ->
// NOT_FOUND, 501 -> UNIMPLEMENTED (not retried), 401 -> UNAUTHENTICATED, 403 ->
// PERMISSION_DENIED, 416 -> OUT_OF_RANGE, BadDigest / XAmzContentSHA256Mismatch ->
// DATA_LOSS, other 5xx, 429 and RequestTimeout -> UNAVAILABLE, other 400 ->
// INVALID_ARGUMENT, anything else -> FAILED_PRECONDITION.
absl::Status S3HttpError(const S3RequestContext& request, const S3Response& response);

// For a conditional read (`if_version` non-empty, quoted or not): VersionMismatchError
// (object_store.h) when `response` is 412 PreconditionFailed, or a 200/206 whose ETag is
// present and not `if_version` (a server that ignores If-Match); OK otherwise, and always
// when `if_version` is "".
absl::Status S3CheckVersion(const S3RequestContext& request, const S3Response& response,
                            const std::string& if_version);

// OK when the 206 `response` holds bytes [offset, offset + length) or their tail up to
// the object's end, as its Content-Range "bytes a-b/total" says (a == offset, b - a + 1
// == the body's length, no more than `length` bytes, fewer only when b is the last
// byte); without Content-Range, when the body is non-empty and at most `length` bytes.
// DATA_LOSS naming the object, both ranges and the problem otherwise. REQUIRES:
// length > 0.
absl::Status S3CheckPartialContent(const S3RequestContext& request, const S3Response& response,
                                   uint64_t offset, uint64_t length);

// The Status of a failed transfer (`code` != CURLE_OK): what happened in words where
// curl's text does not say it, then "curl N: " and `curl_error` (libcurl's error buffer;
// curl_easy_strerror(code) when empty); for a PUT also how many of `body_size` body bytes
// were sent (`body_sent`). DEADLINE_EXCEEDED for a timeout, INVALID_ARGUMENT for failures
// no retry can fix (bad URL or protocol, TLS verification, out of memory), UNAVAILABLE
// otherwise.
absl::Status S3TransportError(const S3RequestContext& request, CURLcode code,
                              std::string_view curl_error, int64_t body_sent,
                              uint64_t body_size);

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_S3_RESPONSE_H_
