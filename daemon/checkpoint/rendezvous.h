// Where a run's shared files live under aggregate_dir, and the leader rendezvous.
//
//   <aggregate_dir>/<run_id>/leader                      who leads the run's rounds
//   <aggregate_dir>/<run_id>/checkpoint-00000007.zckpt   merged checkpoint of round 7
//
// The leader file is text, one key=value per line:
//   address=<host:port>\npid=<pid>\ndaemon=<label>\n
// Readers need only `address`; unknown keys are ignored, so fields can be added.
//
// These functions are the only code that touches aggregate_dir: today it is a local (or
// network-mounted) directory; object storage will come in behind the same functions.
//
// Thread-safety: thread-safe (no shared state; files are replaced atomically).
#ifndef ZEPHON_DAEMON_CHECKPOINT_RENDEZVOUS_H_
#define ZEPHON_DAEMON_CHECKPOINT_RENDEZVOUS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zephon::checkpoint {

// OK when aggregate_dir is non-empty and run_id is a safe single path component
// ([A-Za-z0-9._-]{1,128}, not "." or ".."); else INVALID_ARGUMENT naming the value.
absl::Status ValidateRunLocation(const std::string& aggregate_dir, const std::string& run_id);

// <aggregate_dir>/<run_id>. REQUIRES: ValidateRunLocation(...) is OK.
std::string RunDir(const std::string& aggregate_dir, const std::string& run_id);

// <aggregate_dir>/<run_id>/checkpoint-<round, 8 digits>.zckpt (more digits past 10^8).
// REQUIRES: ValidateRunLocation(...) is OK.
std::string CheckpointPath(const std::string& aggregate_dir, const std::string& run_id,
                           uint64_t round);

// Atomically writes `bytes` to CheckpointPath(...) and returns that path.
// INVALID_ARGUMENT for a bad location; otherwise WriteFileAtomically's errors.
absl::StatusOr<std::string> WriteCheckpointFile(const std::string& aggregate_dir,
                                                const std::string& run_id, uint64_t round,
                                                std::string_view bytes);

// Atomically (re)writes the run's leader file with this process's pid.
// INVALID_ARGUMENT for a bad location or an address/label with a newline or an empty
// address; otherwise WriteFileAtomically's errors.
absl::Status WriteLeader(const std::string& aggregate_dir, const std::string& run_id,
                         const std::string& address, const std::string& label);

// The leader's address from the run's leader file. NOT_FOUND naming the path when there
// is none yet (the leader has not started the run: retry until a deadline); DATA_LOSS
// when the file has no address line; other read errors as ReadFile.
absl::StatusOr<std::string> ReadLeader(const std::string& aggregate_dir,
                                       const std::string& run_id);

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_RENDEZVOUS_H_
