// The --s3-* command-line flags shared by zephond and zephonctl: where the process's
// s3:// stores (aggregate_dir, datasets) connect and how patiently. They become the
// process-wide S3 defaults (SetS3Defaults, s3_store.h); a flag left unset falls back to
// the AWS_* environment and the shared files, as the AWS CLI does.
//
//   --s3-endpoint URL        instead of AWS_ENDPOINT_URL (MinIO, Ceph RGW, s3rver, ...)
//   --s3-region NAME         instead of AWS_REGION / AWS_DEFAULT_REGION / ~/.aws/config
//   --s3-addressing MODE     auto (path-style iff a custom endpoint), path or virtual
//   --s3-timeout-ms N        per attempt, whole transfer (default 60000)
//   --s3-attempts N          attempts per request, exponential backoff (default 4)
//
// Not thread-safe: call AddS3Flags before parsing and ApplyS3Flags once after, at
// startup, before any store is opened.
#ifndef ZEPHON_DAEMON_STORAGE_S3_FLAGS_H_
#define ZEPHON_DAEMON_STORAGE_S3_FLAGS_H_

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"

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

// Validates the values and installs them as the process's S3 defaults.
// INVALID_ARGUMENT naming the flag for an endpoint that is not http(s)://host[:port].
absl::Status ApplyS3Flags(const S3Flags& flags);

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_S3_FLAGS_H_
