// LocalRounds: the node-local half of a checkpoint round.
//
// Every rank of a run calls checkpoint() on its node's zephond at the same training
// step. The daemon waits until every rank of that run attached here has called (the
// local participants), checks that the readers of each PipelineInstance delivered the
// same number of batches, turns the delivered counts into per-lane progress, and sends
// ONE pre-merged CheckpointReport to the run's leader (through `Hooks::submit`). Every
// local caller then gets the leader's answer: the same merged bytes, or the same error.
//
// Thread-safety: thread-safe; each Participate call blocks its own (gRPC) thread until
// the round is done or `deadline` passes.
#ifndef ZEPHON_DAEMON_LOCAL_ROUNDS_H_
#define ZEPHON_DAEMON_LOCAL_ROUNDS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/pipeline_instance.h"
#include "proto/checkpoint.pb.h"

namespace zephon::daemon {

// One rank's checkpoint() call as the daemon sees it.
struct RoundCall {
  std::string run_id;
  uint64_t round = 0;
  uint32_t global_rank = 0;
  uint64_t delivered = 0;  // batches the rank had taken from its iterator
  std::shared_ptr<PipelineInstance> instance;
};

class LocalRounds {
 public:
  struct Hooks {
    // Global ranks of `run_id` attached to this daemon right now.
    std::function<std::set<uint32_t>(const std::string& run_id)> local_ranks;
    // Sends the pre-merged report to the run's leader and returns its answer.
    // `leads` is true when this daemon hosts global_rank 0 of the run.
    std::function<absl::StatusOr<proto::CheckpointResult>(
        const proto::CheckpointReport& report, const RankIdentity& identity, bool leads,
        absl::Time deadline)>
        submit;
    // Name of this daemon in reports and errors (e.g. its socket).
    std::string daemon_label;
  };

  explicit LocalRounds(Hooks hooks) : hooks_(std::move(hooks)) {}

  // Fails every round still open (daemon shutdown); later calls fail at once.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until the round is complete everywhere; see the class comment. Errors:
  // DEADLINE_EXCEEDED naming the local ranks that never called, FAILED_PRECONDITION
  // for unequal counts of peers, or the leader's error.
  absl::StatusOr<proto::CheckpointResult> Participate(RoundCall call, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Key = std::pair<std::string, uint64_t>;  // (run_id, round)

  struct Round {
    // One deadline for the whole local round, from its first caller: every local rank
    // gets the same outcome whatever the order they arrived in.
    absl::Time deadline;
    std::set<uint32_t> expected;
    std::map<uint32_t, RoundCall> calls;  // by global rank
    bool submitting = false;
    std::optional<absl::StatusOr<proto::CheckpointResult>> result;
    int waiters = 0;
  };

  // Pre-merges and reports to the leader; on a local failure, tells the leader too.
  absl::StatusOr<proto::CheckpointResult> Submit(const std::map<uint32_t, RoundCall>& calls,
                                                 const Key& key, absl::Time deadline) const;
  // Checks the local calls and builds the report (no lock held: reads instances).
  absl::StatusOr<proto::CheckpointReport> PreMerge(const std::map<uint32_t, RoundCall>& calls,
                                                   const std::string& run_id,
                                                   uint64_t round) const;

  const Hooks hooks_;
  absl::Mutex mu_;
  std::map<Key, Round> rounds_ ABSL_GUARDED_BY(mu_);
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

// "0-3,5,9-10": a compact, sorted rendering of a rank set for error messages.
std::string FormatRanks(const std::set<uint32_t>& ranks);

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_LOCAL_ROUNDS_H_
