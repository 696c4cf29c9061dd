// The --s3-* command-line flags shared by zephond and zephonctl: where the process's
// s3:// stores (aggregate_dir, datasets) connect and how patiently. They become the
// S3Options that the process passes to whatever opens its stores (S3Store::OpenUrl,
// OpenStore); a flag left unset falls back to the AWS_* environment and the shared
// files, as the AWS CLI does.
//
//   --s3-endpoint URL        instead of AWS_ENDPOINT_URL (MinIO, Ceph RGW, s3rver, ...)
//   --s3-region NAME         instead of AWS_REGION / AWS_DEFAULT_REGION / ~/.aws/config
//   --s3-addressing MODE     auto (path-style iff a custom endpoint), path or virtual
//   --s3-timeout-ms N        per attempt, whole transfer (default 60000)
//   --s3-attempts N          attempts per request, exponential backoff (default 4)
//
// Thread-safety: AddS3Flags as CLI::App (not thread-safe); S3OptionsFromFlags is pure.
#ifndef ZEPHON_DAEMON_STORAGE_S3_FLAGS_H_
#define ZEPHON_DAEMON_STORAGE_S3_FLAGS_H_

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "daemon/storage/s3_store.h"

namespace zephon::storage {

struct S3Flags {
  std::string endpoint;
  std::string region;
  std::string addressing = "auto";
  uint32_t timeout_ms = 60000;
  uint32_t attempts = 4;
};

// Registers the flags on `app` (in an "S3" group), writing into *flags.
void AddS3Flags(CLI::App& app, S3Flags* flags);

// The S3 defaults the flags ask for (no bucket, prefix or credentials).
// INVALID_ARGUMENT naming the flag for an endpoint that is not http(s)://host[:port].
absl::StatusOr<S3Options> S3OptionsFromFlags(const S3Flags& flags);

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_S3_FLAGS_H_
