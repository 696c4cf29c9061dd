// RoundAggregator: the leader's side of checkpoint rounds. Every daemon of a run sends
// one pre-merged CheckpointReport per round (over ZephonPeer.Report, or in-process for
// the leader's own ranks); Submit blocks until the round has an outcome and returns that
// same outcome to every submitter:
//   - complete (ranks == {0..world_size-1}, lanes == {0..C-1}, checks of RoundState
//     passed): the merged CheckpointState is encoded once, written atomically to
//     CheckpointPath(aggregate_dir, run_id, round) when aggregate_dir is set, and every
//     submitter gets the identical {bytes, path};
//   - failed: a check failed (the error names what and who), the round's deadline
//     passed (DEADLINE_EXCEEDED listing the missing ranks/lanes), a submitter gave up
//     (its own deadline or cancellation), the file write failed (an unreachable store
//     reads ABORTED, never UNAVAILABLE, which followers take for "leader unreachable"),
//     or Shutdown(). Nothing is written for a failed round.
// The round's deadline is the arrival of its first report + that report's
// aggregate_timeout_s (default 180 s). Rounds of different runs, and different rounds
// of one run, are independent.
//
// The first completed round of a run taken mid-window (lanes at unequal batch counts,
// mid_window.h) is logged as a warning and carries it in CheckpointResult.warning, for
// the clients to show; later such rounds of that run do not (once per run and leader).
//
// Finished rounds are remembered (at most `finished_rounds_per_run` per run; failed ones
// for max(their timeout, min_failed_retention), completed ones for completed_retention)
// so a late or retried report gets the round's outcome instead of starting a new round.
// A late report for a completed round gets the bytes only if it agrees with what the
// round recorded (else FAILED_PRECONDITION: a run restarted under the same run_id).
//
// Deadlines (the round's and the caller's) are on options.env's clock: a fake clock
// decides expiry, and a waiting Submit notices a move of it when another Submit (or
// Shutdown) finishes the round; its own wait sleeps in real time.
//
// Thread-safety: thread-safe. Submit blocks the calling thread (gRPC handler threads:
// one per daemon per pending round).
#ifndef ZEPHON_DAEMON_CHECKPOINT_ROUND_AGGREGATOR_H_
#define ZEPHON_DAEMON_CHECKPOINT_ROUND_AGGREGATOR_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/storage/s3_store.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "proto/checkpoint.pb.h"

namespace zephon::checkpoint {

struct RoundAggregatorOptions {
  // Round timeout when a report leaves aggregate_timeout_s unset (<= 0).
  absl::Duration default_timeout = absl::Seconds(180);
  // Larger aggregate_timeout_s values are clamped to this.
  absl::Duration max_timeout = absl::Hours(24);
  size_t finished_rounds_per_run = 8;
  absl::Duration completed_retention = absl::Minutes(30);
  absl::Duration min_failed_retention = absl::Minutes(1);
  // How often a waiting Submit re-checks its `cancelled` callback.
  absl::Duration poll_interval = absl::Milliseconds(100);
  // Where an s3:// aggregate_dir connects (zephond's --s3-* flags); fields left empty
  // come from the environment.
  storage::S3Options s3;
  // Clock and files (the merged checkpoint's write); must outlive the aggregator.
  Env* env = Env::Default();
  // Called with each completed round's merged state and its aggregate_dir after the
  // checkpoint was written, before the submitters are answered, without the
  // aggregator's lock (zephond queues the audit logs' step merge: it must return
  // quickly). Null = nothing.
  std::function<void(const proto::CheckpointState& state, const std::string& aggregate_dir)>
      on_complete;
};

class RoundAggregator {
 public:
  explicit RoundAggregator(RoundAggregatorOptions options = {});
  // REQUIRES: no Submit in progress (call Shutdown() and stop the server first).
  ~RoundAggregator();
  RoundAggregator(const RoundAggregator&) = delete;
  RoundAggregator& operator=(const RoundAggregator&) = delete;

  // Adds `report` to its round and waits for the round's outcome (see above).
  // `deadline` is the caller's, on options.env's clock: if it passes (or `cancelled` returns true;
  // polled every poll_interval) before the round is complete, the round fails for everyone with
  // DEADLINE_EXCEEDED (ABORTED when cancelled) naming this report's daemon, because its
  // ranks would never receive the checkpoint. Errors: INVALID_ARGUMENT for a malformed
  // report (no run_id, rank or lane out of range, bad run_id for aggregate_dir);
  // FAILED_PRECONDITION for reports that disagree; DEADLINE_EXCEEDED on timeout;
  // UNAVAILABLE after Shutdown(); the write's error (with context) if it fails. Every
  // error starts with "checkpoint round R of run X".
  absl::StatusOr<proto::CheckpointResult> Submit(
      const proto::CheckpointReport& report, absl::Time deadline,
      const std::function<bool()>& cancelled = nullptr) ABSL_LOCKS_EXCLUDED(mu_);

  // Fails every round still collecting with UNAVAILABLE ("the leader zephond is shutting
  // down") and wakes its submitters; later Submits fail the same way. A round already
  // writing its file finishes. Idempotent, sticky.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Forgets the finished rounds of `run_id` (rounds still collecting are kept) and
  // returns how many: a fresh run that reuses the id of a run that has ended starts its
  // rounds again at 0, and must not meet the old run's outcomes as "late reports".
  size_t ForgetRun(const std::string& run_id) ABSL_LOCKS_EXCLUDED(mu_);

  // Rounds still collecting reports (for status and tests; instantly stale).
  size_t pending_rounds() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Round;
  struct Run {
    std::map<uint64_t, std::shared_ptr<Round>> rounds;
  };

  absl::Duration TimeoutOf(const proto::CheckpointReport& report) const;
  // Records `outcome`, marks the round finished, wakes its submitters.
  void Finish(Round* round, absl::StatusOr<proto::CheckpointResult> outcome)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Merges, encodes and writes a complete round (mu_ is released during the write).
  void Complete(Round* round) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The outcome a (late) `report` gets from a finished round.
  absl::StatusOr<proto::CheckpointResult> OutcomeFor(const Round& round,
                                                     const proto::CheckpointReport& report)
      const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status TimeoutError(const Round& round) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status AbandonedError(const Round& round, const proto::CheckpointReport& report,
                              bool cancelled) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops finished rounds past retention and fails collecting rounds past deadline.
  void CollectGarbage(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RoundAggregatorOptions options_;

  mutable absl::Mutex mu_;
  std::map<std::string, Run> runs_ ABSL_GUARDED_BY(mu_);
  // Runs warned of a mid-window checkpoint (bounded: forgotten in bulk past a limit).
  std::set<std::string> warned_mid_window_ ABSL_GUARDED_BY(mu_);
  // Non-OK once Shutdown() ran.
  absl::Status shutdown_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_ROUND_AGGREGATOR_H_
