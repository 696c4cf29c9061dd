// The retry policy of S3Store (s3_store.h): which answers and transport failures a
// resend can fix, and how long to pause before each resend.
//
// Retried: transport failures that S3Store reports as UNAVAILABLE or DEADLINE_EXCEEDED
// (connection errors, a connection cut mid-body, timeouts); HTTP 5xx except 501
// NotImplemented; 429; and the transient 400s, BadDigest / XAmzContentSHA256Mismatch (a
// body corrupted in transit) and RequestTimeout (an idle connection S3 gave up on).
// Before retry n the pause is full jitter, uniform in [0, min(kS3MaxBackoff,
// initial_backoff * 2^(n-1))]; a 503 or 429 with Retry-After: SECONDS waits that long
// instead, capped at kS3MaxBackoff (an HTTP-date Retry-After is ignored).
//
// Thread-safety: thread-safe (pure functions; S3RetryJitter uses a thread-local
// generator).
#ifndef ZEPHON_DAEMON_STORAGE_S3_RETRY_H_
#define ZEPHON_DAEMON_STORAGE_S3_RETRY_H_

#include <optional>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace zephon::storage {

// The longest pause between two attempts of one request.
inline constexpr absl::Duration kS3MaxBackoff = absl::Seconds(5);

// The pause before retry `retry` (1 before the second attempt): `retry_after` (a 503's or
// 429's Retry-After) clamped to [0, kS3MaxBackoff] when present, else full jitter,
// uniform01 * min(kS3MaxBackoff, initial_backoff * 2^(retry - 1)). `uniform01` is a
// uniform random number in [0, 1] (clamped). Pure; exposed for tests.
absl::Duration S3RetryDelay(int retry, absl::Duration initial_backoff,
                            std::optional<absl::Duration> retry_after, double uniform01);

// A Retry-After header value in delta-seconds ("120"); nullopt for an HTTP-date or
// anything else that is not a plain non-negative integer.
std::optional<absl::Duration> ParseRetryAfterSeconds(std::string_view value);

// The Retry-After to honour for an answer with HTTP `status` whose Retry-After header is
// `header_value` ("" when absent): ParseRetryAfterSeconds(header_value) for 503 and 429,
// nullopt for any other status.
std::optional<absl::Duration> S3RetryAfter(long status, std::string_view header_value);

// A uniform random number in [0, 1) for S3RetryDelay's jitter.
double S3RetryJitter();

// S3's 400 BadDigest / XAmzContentSHA256Mismatch: the body arrived different from what
// the client hashed (corrupted in transit or by a middlebox); S3 stored nothing.
bool IsS3DigestMismatch(long status, std::string_view s3_code);

// S3's 400 RequestTimeout: the connection sat idle past S3's socket timeout mid-request.
bool IsS3RequestTimeout(long status, std::string_view s3_code);

// True for the HTTP answers a resend can fix: 5xx except 501, 429, and the transient
// 400s above. `s3_code` is the Code of the error document ("" when none or not read).
bool IsS3RetryableHttp(long status, std::string_view s3_code);

// True for the transport failures a resend can fix: UNAVAILABLE and DEADLINE_EXCEEDED
// (S3TransportError, s3_response.h, gives INVALID_ARGUMENT to the permanent ones).
bool IsS3RetryableTransport(const absl::Status& status);

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_S3_RETRY_H_
