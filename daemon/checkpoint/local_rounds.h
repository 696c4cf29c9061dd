// LocalRounds: the node-local half of a checkpoint round.
//
// Every rank of a run calls checkpoint() on its node's zephond at the same training
// step. The daemon waits until every rank of that run attached here now has called (the
// local participants, read from the RunRoster at each call, not once per round), checks
// that the readers of each instance took the same number of batches, turns the taken
// counts into per-lane progress, and sends a pre-merged CheckpointReport to the run's
// leader (through the LeaderReporter). A rank that attaches here after the round's
// report went out (ranks need no barrier between attach and checkpoint()) joins the
// round in progress: its call sends one more report of the same round with the calls
// not reported yet, and the leader, which waits for every rank of world_size until
// aggregate_timeout_s, merges them all. Every local caller then gets the leader's
// answer: the same merged bytes, or the same error. Each local round is counted once in
// DaemonCounters, by its first report (which waits for the whole round).
//
// A round that failed is remembered (the newest kRememberedFailures of them) with the
// instances whose readers called it: a rank of one of those instances that calls it
// after every caller has been answered (a straggler whose peers gave up) gets that
// failure at once, instead of opening a fresh local round that can only time out. A
// new instance of the run (a job restarted from an earlier checkpoint, whose round
// numbers start again from there) opens a fresh round. Successful rounds need no memory:
// every rank of world_size was in them, so a later call of one is a rank calling twice.
//
// Leading: reports go to the in-process aggregator when this daemon hosts global_rank
// 0 of the run (one of the calls, or attached now), else to the remote leader.
//
// Thread-safety: thread-safe; each Participate call blocks its own (gRPC) thread until
// the round is done or `deadline` (on options.env's clock) passes.
#ifndef ZEPHON_DAEMON_CHECKPOINT_LOCAL_ROUNDS_H_
#define ZEPHON_DAEMON_CHECKPOINT_LOCAL_ROUNDS_H_

#include <cstdint>
#include <deque>
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
#include "common/env.h"
#include "daemon/checkpoint/leader_reporter.h"
#include "daemon/metrics/counters.h"
#include "daemon/pipeline/formats/dataset.h"
#include "proto/checkpoint.pb.h"
#include "proto/spec.pb.h"

namespace zephon::checkpoint {

// Per-lane progress of an instance (PipelineInstance in zephond). Thread-safe.
class ProgressSource {
 public:
  virtual ~ProgressSource() = default;
  // The instance's lane progress once each of its readers has taken `n_taken` batches.
  virtual absl::StatusOr<std::vector<proto::LaneProgress>> ProgressAfter(
      uint64_t n_taken) const = 0;
};

// Which ranks of a run are attached to this daemon (InstanceRegistry in zephond).
// Thread-safe.
class RunRoster {
 public:
  virtual ~RunRoster() = default;
  virtual std::set<uint32_t> LocalRanksOfRun(const std::string& run_key) const = 0;
};

// What a report says of the instance a rank reads from; fixed when it was created.
struct RoundInstance {
  std::string instance_id;  // groups the calls of one instance's readers
  std::string spec_hash;
  proto::PipelineSpec spec;  // resolved
  std::vector<proto::ScheduleRevision> schedule_history;  // CheckpointState field 15
  std::vector<proto::RunLineage> lineage;                 // CheckpointState field 16
  std::vector<std::shared_ptr<const pipeline::Dataset>> datasets;
  uint32_t world_size = 1;
  uint32_t canonical_replicas = 1;
  uint32_t dp_degree = 1;
  uint32_t dp_group_id = 0;
  double aggregate_timeout_s = 180;
  LeaderRoute route;
  std::shared_ptr<const ProgressSource> progress;  // not null
};

// One rank's checkpoint() call as the daemon sees it.
struct RoundCall {
  std::string run_id;  // the run key: run_id, or "local-N" for an unnamed run
  uint64_t round = 0;
  uint32_t global_rank = 0;
  uint64_t taken = 0;  // batches the rank had taken from its iterator
  std::shared_ptr<const RoundInstance> instance;  // not null
};

struct LocalRoundsOptions {
  // Name of this daemon in reports and errors (e.g. its socket).
  std::string daemon_label;
  // Not owned; each must outlive the LocalRounds.
  const RunRoster* roster = nullptr;
  const LeaderReporter* reporter = nullptr;
  metrics::DaemonCounters* counters = nullptr;
  // The clock of the rounds' deadlines and the recorded round durations; must outlive
  // the LocalRounds.
  Env* env = Env::Default();
};

class LocalRounds {
 public:
  // REQUIRES: roster, reporter and counters are set.
  explicit LocalRounds(LocalRoundsOptions options);

  // Fails every round still open (daemon shutdown); later calls fail at once.
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until the round is complete everywhere; see the class comment. Errors:
  // DEADLINE_EXCEEDED naming the local ranks that never called (attached here, yet no
  // checkpoint() by the round's deadline, the first local call's), FAILED_PRECONDITION
  // for unequal counts of peers or a rank calling twice, UNAVAILABLE while shutting
  // down, or the leader's error; for a round that already failed, its error (same code)
  // saying that this rank called late.
  absl::StatusOr<proto::CheckpointResult> Participate(RoundCall call, absl::Time deadline)
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  using Key = std::pair<std::string, uint64_t>;  // (run_id, round)

  struct Round {
    // One deadline for the whole local round, from its first caller: every local rank
    // gets the same outcome whatever the order they arrived in.
    absl::Time deadline;
    absl::Time started;                   // its first call
    std::map<uint32_t, RoundCall> calls;  // by global rank
    std::set<uint32_t> reported;          // ranks whose calls went into a report
    int submitting = 0;                   // reports in flight to the leader
    // The first answer of the leader (or local failure): every caller gets it.
    std::optional<absl::StatusOr<proto::CheckpointResult>> result;
    int waiters = 0;
  };

  // Pre-merges and reports to the leader; on a local failure, tells the leader too.
  // `counted`: the local round's first report, counted in the round metrics.
  absl::StatusOr<proto::CheckpointResult> Submit(const std::map<uint32_t, RoundCall>& calls,
                                                 const Key& key, absl::Time deadline,
                                                 bool counted) const;
  // One report to the leader, counted in the round metrics when `counted`.
  absl::StatusOr<proto::CheckpointResult> Report(const proto::CheckpointReport& report,
                                                 const LeaderRoute& route, bool leads,
                                                 absl::Time deadline, bool counted) const;
  // Checks the local calls and builds the report (no lock held: reads instances).
  absl::StatusOr<proto::CheckpointReport> PreMerge(const std::map<uint32_t, RoundCall>& calls,
                                                   const std::string& run_id,
                                                   uint64_t round) const;

  struct Failure {
    absl::Status status;
    std::set<std::string> instance_ids;  // Of the calls the round had.
  };

  // Records the failure of a finished round, forgetting the oldest beyond the bound.
  void RememberFailure(const Key& key, Failure failure) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  static constexpr size_t kRememberedFailures = 256;

  const LocalRoundsOptions options_;
  absl::Mutex mu_;
  std::map<Key, Round> rounds_ ABSL_GUARDED_BY(mu_);
  std::map<Key, Failure> failed_rounds_ ABSL_GUARDED_BY(mu_);
  std::deque<Key> failed_order_ ABSL_GUARDED_BY(mu_);  // oldest first
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

// "0-3,5,9-10": a compact, sorted rendering of a rank set for error messages.
std::string FormatRanks(const std::set<uint32_t>& ranks);

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_LOCAL_ROUNDS_H_
