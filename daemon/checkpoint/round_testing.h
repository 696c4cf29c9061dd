// Test helpers for daemon/checkpoint: CheckpointReports of a synthetic run, status
// message matching and scratch directories. Test-only.
//
// The run has world_size ranks in DP groups of `ranks_per_group` consecutive ranks
// (tensor-parallel peers); group g owns lanes [g * lanes_per_group, (g+1) *
// lanes_per_group). Every lane of group g is at next_batch_index == taken(g).
#ifndef ZEPHON_DAEMON_CHECKPOINT_ROUND_TESTING_H_
#define ZEPHON_DAEMON_CHECKPOINT_ROUND_TESTING_H_

#include <stdlib.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/temp_dir_testing.h"
#include "gtest/gtest.h"
#include "proto/checkpoint.pb.h"

namespace zephon::checkpoint::testing {

struct RunShape {
  std::string run_id = "run-1";
  uint64_t round = 0;
  uint32_t world_size = 6;
  uint32_t ranks_per_group = 2;
  uint32_t lanes_per_group = 2;
  uint64_t taken = 12;
  std::string aggregate_dir;
  double timeout_s = 0;

  uint32_t dp_degree() const { return world_size / ranks_per_group; }
  uint32_t canonical_replicas() const { return dp_degree() * lanes_per_group; }
};

// The report of `daemon` hosting `ranks`, with the lanes of their groups.
inline proto::CheckpointReport MakeReport(const RunShape& shape, const std::string& daemon,
                                          const std::vector<uint32_t>& ranks) {
  proto::CheckpointReport report;
  report.set_run_id(shape.run_id);
  report.set_round(shape.round);
  report.set_world_size(shape.world_size);
  report.set_canonical_replicas(shape.canonical_replicas());
  report.set_spec_hash("spec-hash-1");
  report.set_seed(1234);
  report.set_daemon(daemon);
  report.set_aggregate_dir(shape.aggregate_dir);
  report.set_aggregate_timeout_s(shape.timeout_s);
  std::vector<uint32_t> groups;
  for (uint32_t rank : ranks) {
    proto::RankProgress* r = report.add_ranks();
    r->set_global_rank(rank);
    r->set_dp_degree(shape.dp_degree());
    r->set_dp_group_id(rank / shape.ranks_per_group);
    r->set_taken(shape.taken);
    r->set_instance_id("inst-" + std::to_string(rank / shape.ranks_per_group));
    r->set_daemon(daemon);
    if (groups.empty() || groups.back() != rank / shape.ranks_per_group) {
      groups.push_back(rank / shape.ranks_per_group);
    }
  }
  for (uint32_t g : groups) {
    for (uint32_t i = 0; i < shape.lanes_per_group; ++i) {
      proto::LaneProgress* l = report.add_lanes();
      l->set_lane(g * shape.lanes_per_group + i);
      l->set_next_batch_index(shape.taken);
      l->set_flush_group_chunk(shape.taken / 4);
      l->set_records_into_group(shape.taken % 4);
    }
  }
  return report;
}

inline ::testing::AssertionResult MessageHas(const absl::Status& status,
                                             const std::string& text) {
  if (std::string(status.message()).find(text) != std::string::npos) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure() << status << " lacks \"" << text << "\"";
}

using ::zephon::testing::MakeTempDir;  // common/temp_dir_testing.h

// A round's outcome as Submit/Report return it.
using Result = absl::StatusOr<proto::CheckpointResult>;

// A deadline `d` from now.
inline absl::Time In(absl::Duration d) { return absl::Now() + d; }

}  // namespace zephon::checkpoint::testing

#endif  // ZEPHON_DAEMON_CHECKPOINT_ROUND_TESTING_H_
