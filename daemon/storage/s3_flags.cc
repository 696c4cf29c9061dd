#include "daemon/storage/s3_flags.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "daemon/storage/s3_store.h"

namespace zephon::storage {

void AddS3Flags(CLI::App& app, S3Flags* flags) {
  const std::string group = "S3 (s3:// aggregate_dir and datasets)";
  app.add_option("--s3-endpoint", flags->endpoint,
                 "S3 endpoint URL, e.g. http://minio:9000 (default: AWS_ENDPOINT_URL, else "
                 "AWS's regional endpoint)")
      ->group(group);
  app.add_option("--s3-region", flags->region,
                 "S3 region (default: AWS_REGION, AWS_DEFAULT_REGION, ~/.aws/config, "
                 "us-east-1)")
      ->group(group);
  app.add_option("--s3-addressing", flags->addressing,
                 "Bucket addressing: path (host/bucket/key), virtual (bucket.host/key) or "
                 "auto (path-style iff a custom endpoint is set)")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "path", "virtual"}))
      ->group(group);
  app.add_option("--s3-timeout-ms", flags->timeout_ms,
                 "Per-attempt timeout of an S3 request (the whole transfer of one object "
                 "or block); with --s3-attempts it bounds how long a dead store stalls a "
                 "pipeline or a checkpoint before the ranks get the error")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{1}, uint32_t{3600000}))
      ->group(group);
  app.add_option("--s3-attempts", flags->attempts,
                 "Attempts per S3 request (retries with exponential backoff on 5xx, 429, "
                 "timeouts and connection errors)")
      ->capture_default_str()
      ->check(CLI::Range(uint32_t{1}, uint32_t{100}))
      ->group(group);
}

absl::StatusOr<S3Options> S3OptionsFromFlags(const S3Flags& flags) {
  if (!flags.endpoint.empty()) {
    absl::string_view rest = flags.endpoint;
    const bool scheme =
        absl::ConsumePrefix(&rest, "http://") || absl::ConsumePrefix(&rest, "https://");
    absl::ConsumeSuffix(&rest, "/");
    if (!scheme || rest.empty() || rest.find_first_of("/?#@ ") != absl::string_view::npos ||
        rest.front() == ':') {
      return absl::InvalidArgumentError(absl::StrCat(
          "--s3-endpoint='", flags.endpoint,
          "': expected http://host[:port] or https://host[:port] (no path)"));
    }
  }
  S3Options defaults;
  defaults.endpoint = flags.endpoint;
  defaults.region = flags.region;
  if (flags.addressing == "path") defaults.path_style = true;
  if (flags.addressing == "virtual") defaults.path_style = false;
  defaults.request_timeout = absl::Milliseconds(flags.timeout_ms);
  defaults.connect_timeout = std::min(defaults.connect_timeout, defaults.request_timeout);
  defaults.max_attempts = static_cast<int>(flags.attempts);
  return defaults;
}

}  // namespace zephon::storage
