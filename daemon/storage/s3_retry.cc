#include "daemon/storage/s3_retry.h"

#include <algorithm>
#include <cstdint>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/string_view.h"

namespace zephon::storage {

absl::Duration S3RetryDelay(int retry, absl::Duration initial_backoff,
                            std::optional<absl::Duration> retry_after, double uniform01) {
  if (retry_after.has_value()) {
    return std::clamp(*retry_after, absl::ZeroDuration(), kS3MaxBackoff);
  }
  absl::Duration ceiling = std::clamp(initial_backoff, absl::ZeroDuration(), kS3MaxBackoff);
  for (int i = 1; i < retry && ceiling < kS3MaxBackoff; ++i) {
    ceiling = std::min(ceiling * 2, kS3MaxBackoff);
  }
  return ceiling * std::clamp(uniform01, 0.0, 1.0);
}

std::optional<absl::Duration> ParseRetryAfterSeconds(std::string_view value) {
  const absl::string_view v =
      absl::StripAsciiWhitespace(absl::string_view(value.data(), value.size()));
  if (v.empty() || v.size() > 9 ||
      !std::all_of(v.begin(), v.end(), [](char c) { return absl::ascii_isdigit(c); })) {
    return std::nullopt;  // an HTTP-date, or garbage
  }
  int64_t seconds = 0;
  if (!absl::SimpleAtoi(v, &seconds)) return std::nullopt;
  return absl::Seconds(seconds);
}

std::optional<absl::Duration> S3RetryAfter(long status, std::string_view header_value) {
  if (status != 503 && status != 429) return std::nullopt;
  return ParseRetryAfterSeconds(header_value);
}

double S3RetryJitter() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(gen);
}

bool IsS3DigestMismatch(long status, std::string_view s3_code) {
  return status == 400 && (s3_code == "BadDigest" || s3_code == "XAmzContentSHA256Mismatch");
}

bool IsS3RequestTimeout(long status, std::string_view s3_code) {
  return status == 400 && s3_code == "RequestTimeout";
}

bool IsS3RetryableHttp(long status, std::string_view s3_code) {
  if (status == 501) return false;  // NotImplemented: no resend changes it
  return status >= 500 || status == 429 || IsS3DigestMismatch(status, s3_code) ||
         IsS3RequestTimeout(status, s3_code);
}

bool IsS3RetryableTransport(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
}

}  // namespace zephon::storage
