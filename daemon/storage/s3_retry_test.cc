// S3Store's retry policy: backoff timing, Retry-After, and which answers are retried.
#include "daemon/storage/s3_retry.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

TEST(S3RetryDelay, FullJitterUnderADoublingCeilingCappedAtFiveSeconds) {
  const absl::Duration base = absl::Milliseconds(100);
  EXPECT_EQ(S3RetryDelay(1, base, std::nullopt, 0.0), absl::ZeroDuration());
  EXPECT_EQ(S3RetryDelay(1, base, std::nullopt, 1.0), absl::Milliseconds(100));
  EXPECT_EQ(S3RetryDelay(1, base, std::nullopt, 0.5), absl::Milliseconds(50));
  EXPECT_EQ(S3RetryDelay(2, base, std::nullopt, 1.0), absl::Milliseconds(200));
  EXPECT_EQ(S3RetryDelay(4, base, std::nullopt, 1.0), absl::Milliseconds(800));
  EXPECT_EQ(S3RetryDelay(4, base, std::nullopt, 0.25), absl::Milliseconds(200));
  EXPECT_EQ(S3RetryDelay(7, base, std::nullopt, 1.0), kS3MaxBackoff);  // 6.4 s capped
  EXPECT_EQ(S3RetryDelay(1000, base, std::nullopt, 1.0), kS3MaxBackoff);  // no overflow
  EXPECT_EQ(S3RetryDelay(1000, base, std::nullopt, 0.5), kS3MaxBackoff / 2);
  EXPECT_EQ(S3RetryDelay(1, absl::Seconds(60), std::nullopt, 1.0), kS3MaxBackoff);
  EXPECT_EQ(S3RetryDelay(2, base, std::nullopt, 7.0), absl::Milliseconds(200));  // clamped
  EXPECT_EQ(S3RetryDelay(2, base, std::nullopt, -1.0), absl::ZeroDuration());
  EXPECT_EQ(S3RetryDelay(3, -base, std::nullopt, 1.0), absl::ZeroDuration());
}

TEST(S3RetryDelay, RetryAfterIsHonouredUpToTheCapWithoutJitter) {
  const absl::Duration base = absl::Milliseconds(100);
  EXPECT_EQ(S3RetryDelay(1, base, absl::Seconds(2), 0.0), absl::Seconds(2));
  EXPECT_EQ(S3RetryDelay(3, base, absl::Seconds(2), 1.0), absl::Seconds(2));
  EXPECT_EQ(S3RetryDelay(1, base, absl::Seconds(3600), 0.5), kS3MaxBackoff);
  EXPECT_EQ(S3RetryDelay(1, base, absl::ZeroDuration(), 1.0), absl::ZeroDuration());
}

TEST(ParseRetryAfterSeconds, AcceptsDeltaSecondsOnly) {
  EXPECT_EQ(ParseRetryAfterSeconds("3"), absl::Seconds(3));
  EXPECT_EQ(ParseRetryAfterSeconds(" 120 "), absl::Seconds(120));
  EXPECT_EQ(ParseRetryAfterSeconds("0"), absl::ZeroDuration());
  EXPECT_EQ(ParseRetryAfterSeconds(""), std::nullopt);
  EXPECT_EQ(ParseRetryAfterSeconds("-1"), std::nullopt);
  EXPECT_EQ(ParseRetryAfterSeconds("1.5"), std::nullopt);
  EXPECT_EQ(ParseRetryAfterSeconds("99999999999999999999"), std::nullopt);
  EXPECT_EQ(ParseRetryAfterSeconds("Wed, 21 Oct 2015 07:28:00 GMT"), std::nullopt);
}

TEST(S3RetryAfter, OnlyA503OrA429CarriesOne) {
  EXPECT_EQ(S3RetryAfter(503, "2"), absl::Seconds(2));
  EXPECT_EQ(S3RetryAfter(429, "1"), absl::Seconds(1));
  EXPECT_EQ(S3RetryAfter(503, ""), std::nullopt);
  EXPECT_EQ(S3RetryAfter(503, "Wed, 21 Oct 2015 07:28:00 GMT"), std::nullopt);
  EXPECT_EQ(S3RetryAfter(500, "2"), std::nullopt);
  EXPECT_EQ(S3RetryAfter(200, "2"), std::nullopt);
}

TEST(S3RetryJitter, StaysInTheUnitInterval) {
  for (int i = 0; i < 1000; ++i) {
    const double u = S3RetryJitter();
    EXPECT_GE(u, 0.0);
    EXPECT_LE(u, 1.0);
  }
}

TEST(IsS3RetryableHttp, ServerErrorsThrottlingAndTransient400sButNot501) {
  EXPECT_TRUE(IsS3RetryableHttp(500, ""));
  EXPECT_TRUE(IsS3RetryableHttp(502, ""));
  EXPECT_TRUE(IsS3RetryableHttp(503, "SlowDown"));
  EXPECT_TRUE(IsS3RetryableHttp(504, ""));
  EXPECT_TRUE(IsS3RetryableHttp(429, ""));
  EXPECT_TRUE(IsS3RetryableHttp(400, "BadDigest"));
  EXPECT_TRUE(IsS3RetryableHttp(400, "XAmzContentSHA256Mismatch"));
  EXPECT_TRUE(IsS3RetryableHttp(400, "RequestTimeout"));
  EXPECT_FALSE(IsS3RetryableHttp(501, "NotImplemented"));  // no resend changes it
  EXPECT_FALSE(IsS3RetryableHttp(400, "InvalidArgument"));
  EXPECT_FALSE(IsS3RetryableHttp(400, ""));
  EXPECT_FALSE(IsS3RetryableHttp(403, "AccessDenied"));
  EXPECT_FALSE(IsS3RetryableHttp(404, "NoSuchKey"));
  EXPECT_FALSE(IsS3RetryableHttp(412, "PreconditionFailed"));
  EXPECT_FALSE(IsS3RetryableHttp(200, ""));
  EXPECT_FALSE(IsS3RetryableHttp(206, ""));
}

TEST(IsS3RetryableHttp, TransientCodesCountOnlyWith400) {
  EXPECT_TRUE(IsS3DigestMismatch(400, "BadDigest"));
  EXPECT_FALSE(IsS3DigestMismatch(403, "BadDigest"));
  EXPECT_TRUE(IsS3RequestTimeout(400, "RequestTimeout"));
  EXPECT_FALSE(IsS3RequestTimeout(408, "RequestTimeout"));
  EXPECT_FALSE(IsS3RetryableHttp(409, "RequestTimeout"));
}

TEST(IsS3RetryableTransport, UnavailableAndDeadlineExceededOnly) {
  EXPECT_TRUE(IsS3RetryableTransport(absl::UnavailableError("reset")));
  EXPECT_TRUE(IsS3RetryableTransport(absl::DeadlineExceededError("timeout")));
  EXPECT_FALSE(IsS3RetryableTransport(absl::InvalidArgumentError("bad URL")));
  EXPECT_FALSE(IsS3RetryableTransport(absl::ResourceExhaustedError("curl_easy_init")));
  EXPECT_FALSE(IsS3RetryableTransport(absl::OkStatus()));
}

}  // namespace
}  // namespace zephon::storage
