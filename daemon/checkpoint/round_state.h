// RoundState: the reports of one checkpoint round of one run, the consistency checks
// between them, and the merge into a CheckpointState. Pure logic, no clock, no locks:
// RoundAggregator (round_aggregator.h) adds waiting, deadlines and the file write.
//
// Checks (each error names what disagrees and which daemons/ranks; any error means the
// round has failed):
//   - reports agree on run_id, round, world_size, canonical_replicas, spec_hash, seed and
//     aggregate_dir;
//   - every rank is in [0, world_size), reported once, with dp_group_id < dp_degree,
//     and all ranks share one dp_degree;
//   - ranks of one DP group (same dp_degree, dp_group_id) took the same count;
//   - every lane is in [0, canonical_replicas); a lane reported twice must carry equal
//     progress (peers of one DP group on different daemons report the same lanes:
//     identical copies are deduplicated).
// The round is complete when ranks == {0..world_size-1} and lanes == {0..C-1}.
//
// Thread-safety: thread-compatible.
#ifndef ZEPHON_DAEMON_CHECKPOINT_ROUND_STATE_H_
#define ZEPHON_DAEMON_CHECKPOINT_ROUND_STATE_H_

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"

namespace zephon::checkpoint {

// "3-7,9" for {3,4,5,6,7,9}; input sorted ascending.
std::string FormatIdRanges(const std::vector<uint32_t>& ids);

class RoundState {
 public:
  RoundState() = default;

  // Adds one daemon's report. On error nothing was added and the round must be failed.
  // A report byte-identical to one already applied is accepted as a no-op (a retry).
  absl::Status Apply(const proto::CheckpointReport& report);

  // True when a report byte-identical to `report` was applied.
  bool Contains(const proto::CheckpointReport& report) const;

  // OK when `report` agrees with what this (complete) round recorded: same header
  // fields, and each of its ranks and lanes present with equal progress. Used for a
  // report that arrives after completion. FAILED_PRECONDITION otherwise.
  absl::Status CheckConsistent(const proto::CheckpointReport& report) const;

  bool empty() const { return reports_.empty(); }
  bool IsComplete() const;
  std::vector<uint32_t> MissingRanks() const;
  std::vector<uint32_t> MissingLanes() const;
  // "node-a (ranks 0-2), node-b (ranks 3-5)": who has reported, for error messages.
  std::string DescribeReporters() const;

  // The merged state, lanes and ranks sorted. REQUIRES: IsComplete().
  proto::CheckpointState Merge(int64_t created_unix_ms) const;

  // Header of the first report: "checkpoint round R of run X".
  std::string Describe() const;
  // aggregate_timeout_s of the first report (0 when unset). REQUIRES: !empty().
  double timeout_s() const { return first_.aggregate_timeout_s(); }
  const std::string& aggregate_dir() const { return first_.aggregate_dir(); }

 private:
  struct LaneEntry {
    proto::LaneProgress progress;
    std::string daemon;
  };
  struct GroupEntry {
    uint32_t rank = 0;
    uint64_t taken = 0;
  };

  absl::Status CheckHeader(const proto::CheckpointReport& report) const;
  absl::Status CheckRanks(const proto::CheckpointReport& report) const;
  absl::Status CheckLanes(const proto::CheckpointReport& report) const;

  // The first report without ranks and lanes: the reference for every later header.
  proto::CheckpointReport first_;
  // Serialized (deterministic) reports applied, for retry detection.
  std::vector<std::string> reports_;
  std::map<uint32_t, proto::RankProgress> ranks_;
  std::map<uint32_t, LaneEntry> lanes_;
  std::map<std::pair<uint32_t, uint32_t>, GroupEntry> groups_;  // (dp_degree, group)
};

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_ROUND_STATE_H_
