// Comparing audit logs (audit_log.h) by global step: what `zephonctl audit diff`
// reports. A run's records are indexed by (lane, lane batch); step N of B batches (B =
// k * C) is lane batches [N*k, (N+1)*k) of every lane (pipeline::StepLocator), whatever
// dp_degree the run had at the time, so a run resumed on another dp_degree compares step
// by step with one that never stopped.
//
// Thread-safety: pure functions and value types.
#ifndef ZEPHON_DAEMON_AUDIT_AUDIT_DIFF_H_
#define ZEPHON_DAEMON_AUDIT_AUDIT_DIFF_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/audit.pb.h"

namespace zephon::audit {

// One run's batches by (lane, lane batch index).
struct RunIndex {
  uint32_t canonical_replicas = 0;
  std::vector<std::string> spec_hashes;  // distinct, in order of appearance
  std::map<std::pair<uint32_t, uint64_t>, proto::AuditRecord> batches;
};

// Indexes records of one run. The same lane batch published twice (a batch prefetched
// before a restart and published again after it) must be the same batch. Errors:
// DATA_LOSS naming the lane batch when its two records differ (tokens or samples);
// FAILED_PRECONDITION when the records disagree on canonical_replicas.
absl::StatusOr<RunIndex> IndexRun(const std::vector<proto::AuditRecord>& records);

struct StepDifference {
  uint64_t step = 0;
  uint32_t lane = 0;
  uint64_t lane_batch = 0;
  std::string a_sha256, b_sha256;  // hex
  // (dataset, shard, index) triples in one run's batch and not the other's.
  std::vector<std::vector<uint64_t>> only_in_a, only_in_b;
};

struct DiffReport {
  uint64_t batches_per_lane = 0;  // k
  uint64_t steps_compared = 0;    // complete in both runs, within the range
  std::optional<uint64_t> first_step, last_step;  // of those compared
  std::vector<uint64_t> only_a, only_b;  // steps complete in one run only (the first few)
  std::optional<StepDifference> first_difference;
  uint64_t differing_steps = 0;
};

// Compares two runs step by step over steps [from, to) (to = UINT64_MAX: all), steps of
// `global_batches` batches (0 = C). A step counts when both runs hold all its batches.
// Errors: INVALID_ARGUMENT when the runs' canonical_replicas differ or global_batches is
// not a multiple of it.
absl::StatusOr<DiffReport> DiffRuns(const RunIndex& a, const RunIndex& b,
                                    uint64_t global_batches, uint64_t from = 0,
                                    uint64_t to = UINT64_MAX);

}  // namespace zephon::audit

#endif  // ZEPHON_DAEMON_AUDIT_AUDIT_DIFF_H_
