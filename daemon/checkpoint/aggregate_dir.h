// AggregateDir: a run's shared files under aggregate_dir, which is a local (or
// network-mounted) directory or an object-store prefix ("s3://bucket/prefix"). Every
// access goes through one storage::ObjectStore, so both behave alike:
//
//   <run_id>/leader                      who leads the run's checkpoint rounds
//   <run_id>/checkpoint-00000007.zckpt   merged checkpoint of round 7 (8+ digits)
//
// The leader file is text, one key=value per line:
//   address=<host:port>\npid=<pid>\ndaemon=<label>\ninstance=<id>\nhost=<name>\n
// (peer_service=none instead of address= when the leader serves no peers). Readers need
// only `address`; unknown keys are ignored, so fields can be added. `instance` is the
// writing zephond's per-process id: labels (socket paths) and pids repeat across nodes
// and containers, so it is what tells a daemon that the file names itself.
//
// Atomicity: every file is written whole through the store (local: LocalStore::Put, temp
// file + fsync + rename through the Env, so tests can inject faults; S3: one PUT
// carrying Content-MD5), so a reader never sees a partial checkpoint and a failed write
// leaves nothing (or the previous object) behind. Checkpoint files also carry their own
// CRC (checkpoint_file.h).
//
// Thread-safety: thread-safe (the store is; no other mutable state).
#ifndef ZEPHON_DAEMON_CHECKPOINT_AGGREGATE_DIR_H_
#define ZEPHON_DAEMON_CHECKPOINT_AGGREGATE_DIR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "daemon/storage/object_store.h"
#include "daemon/storage/s3_store.h"

namespace zephon::checkpoint {

// A run's leader file, parsed (see the file comment).
struct LeaderRecord {
  std::string address;   // Its peer address; empty when it serves no peers.
  std::string daemon;    // Its label (socket path), for messages.
  std::string instance;  // Its per-process id; empty in files of older zephonds.
  std::string host;      // The writer's host name (LocalHostName); empty in older files.
};

// This machine's host name (gethostname; "" when it fails). With the daemon label it
// names a daemon across its restarts, where the instance id names one process.
std::string LocalHostName();

// FAILED_PRECONDITION for a follower of `leader`, which serves no peers: names it and
// the flags that fix it.
absl::Status NoPeerServiceError(const std::string& run_id, const LeaderRecord& leader);

// OK when aggregate_dir is non-empty and run_id is a safe single path component
// ([A-Za-z0-9._-]{1,128}, not "." or ".."); else INVALID_ARGUMENT naming the value.
absl::Status ValidateRunLocation(const std::string& aggregate_dir, const std::string& run_id);

// "<aggregate_dir>/<key>" with aggregate_dir's trailing '/' dropped: a filesystem path
// or a URL ("s3://bucket/prefix/run/leader"), as errors and results name objects.
std::string JoinLocation(const std::string& aggregate_dir, const std::string& key);

// <aggregate_dir>/<run_id>/checkpoint-<round, 8 digits>.zckpt (more digits past 10^8).
// REQUIRES: ValidateRunLocation(...) is OK.
std::string CheckpointPath(const std::string& aggregate_dir, const std::string& run_id,
                           uint64_t round);

// One checkpoint object of a run, as listed.
struct CheckpointObject {
  uint64_t round = 0;
  std::string location;  // JoinLocation(aggregate_dir, key)
  storage::ObjectInfo info;
};

// One run found under aggregate_dir.
struct RunEntry {
  std::string run_id;
  bool has_leader = false;
  std::vector<CheckpointObject> checkpoints;  // by round, ascending
};

class AggregateDir {
 public:
  // Opens the store at `aggregate_dir` (storage::OpenStore: a local directory, created
  // if missing, or s3://...). INVALID_ARGUMENT for an empty or malformed location;
  // FAILED_PRECONDITION when an s3:// location has no credentials. Errors are prefixed
  // with "aggregate_dir '<location>'". Does not contact a remote store.
  // `budget` bounds each call on an s3:// store, retries included (its per-attempt
  // timeout shrinks to budget / attempts, at least 1 s): callers with a deadline pass
  // what is left of it. Local directories ignore it. `s3` is where an s3:// location
  // connects (the owner's --s3-* settings; storage::OpenStore). A local directory's
  // store writes through `env` (storage::LocalStore), which must outlive the AggregateDir.
  static absl::StatusOr<std::unique_ptr<AggregateDir>> Open(
      const std::string& aggregate_dir, const storage::S3Options& s3,
      absl::Duration budget = absl::InfiniteDuration(), Env* env = Env::Default());

  // Over an already-open store (tests; `location` names it in results and errors). Every
  // write goes to `store`.
  AggregateDir(std::string location, std::unique_ptr<storage::ObjectStore> store)
      : location_(std::move(location)), store_(std::move(store)) {}

  AggregateDir(const AggregateDir&) = delete;
  AggregateDir& operator=(const AggregateDir&) = delete;

  const std::string& location() const { return location_; }

  // Writes `bytes` whole as the run's checkpoint of `round` and returns its location.
  // INVALID_ARGUMENT for a bad run_id; otherwise the store's errors (naming the object).
  absl::StatusOr<std::string> WriteCheckpoint(const std::string& run_id, uint64_t round,
                                              std::string_view bytes);

  // The bytes of the run's checkpoint of `round`; NOT_FOUND naming it when absent.
  absl::StatusOr<std::string> ReadCheckpoint(const std::string& run_id, uint64_t round);

  // Removes the run's checkpoint of `round` (absent is OK).
  absl::Status DeleteCheckpoint(const std::string& run_id, uint64_t round);

  // (Re)writes the run's leader file with this process's pid. An empty `address` records
  // that the leader serves no peers (ReadLeader then fails with the fix). `instance`
  // (empty: not recorded) is the writer's per-process id (LeaderRecord). INVALID_ARGUMENT
  // for a bad run_id or an address/label/instance with a newline.
  absl::Status WriteLeader(const std::string& run_id, const std::string& address,
                           const std::string& label, const std::string& instance = "");

  // What the run's leader file says. NOT_FOUND as ReadLeader; DATA_LOSS when it has
  // neither an address= nor a peer_service=none line; other store errors as they come.
  absl::StatusOr<LeaderRecord> ReadLeaderRecord(const std::string& run_id);

  // The leader's address from the run's leader file. NOT_FOUND naming the file when
  // there is none yet (the leader has not started the run: retry until a deadline);
  // FAILED_PRECONDITION (naming the flag to set) when the leader serves no peers;
  // DATA_LOSS when it has no address line; other store errors as they come (a missing
  // bucket or a refused credential is not NOT_FOUND, so pollers can stop early).
  absl::StatusOr<std::string> ReadLeader(const std::string& run_id);

  // The run's checkpoint objects, by round. Keys under the run that are not
  // checkpoint-<digits>.zckpt are ignored. An unknown run gives an empty list.
  absl::StatusOr<std::vector<CheckpointObject>> ListCheckpoints(const std::string& run_id);

  // Every run with a leader file or a checkpoint, by run_id. One listing of the store.
  absl::StatusOr<std::vector<RunEntry>> ListRuns();

 private:
  const std::string location_;
  const std::unique_ptr<storage::ObjectStore> store_;
};

// Reads a checkpoint named by a filesystem path or an s3:// URL (zephonctl inspect and
// verify): the object's bytes and its ObjectInfo. NOT_FOUND / store errors naming it.
struct LocatedObject {
  std::string bytes;
  storage::ObjectInfo info;
};
// `s3` is where an s3:// location connects; `env` checks that a local path is a
// regular file.
absl::StatusOr<LocatedObject> ReadLocation(const std::string& location,
                                           const storage::S3Options& s3,
                                           Env* env = Env::Default());

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_AGGREGATE_DIR_H_
