#include "daemon/checkpoint/round_state.h"

#include "daemon/checkpoint/round_testing.h"
#include "gtest/gtest.h"

namespace zephon::checkpoint {
namespace {

using testing::MakeReport;
using testing::MessageHas;
using testing::RunShape;

TEST(FormatIdRangesTest, CompressesRuns) {
  EXPECT_EQ(FormatIdRanges({3, 4, 5, 6, 7, 9}), "3-7,9");
  EXPECT_EQ(FormatIdRanges({0}), "0");
  EXPECT_EQ(FormatIdRanges({}), "");
  EXPECT_EQ(FormatIdRanges({1, 2, 4, 5}), "1-2,4-5");
}

TEST(RoundStateTest, CompleteWhenEveryRankAndLaneIsCovered) {
  RunShape shape;
  RoundState state;
  ASSERT_TRUE(state.Apply(MakeReport(shape, "node-c", {4, 5})).ok());
  ASSERT_TRUE(state.Apply(MakeReport(shape, "node-a", {0, 1})).ok());
  EXPECT_FALSE(state.IsComplete());
  EXPECT_EQ(state.MissingRanks(), (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(state.MissingLanes(), (std::vector<uint32_t>{2, 3}));
  EXPECT_EQ(state.DescribeReporters(), "node-a (ranks 0-1), node-c (ranks 4-5)");
  ASSERT_TRUE(state.Apply(MakeReport(shape, "node-b", {2, 3})).ok());
  ASSERT_TRUE(state.IsComplete());

  const proto::CheckpointState merged = state.Merge(42);
  EXPECT_EQ(merged.format_version(), 1u);
  EXPECT_EQ(merged.run_id(), "run-1");
  EXPECT_EQ(merged.spec_hash(), "spec-hash-1");
  EXPECT_EQ(merged.canonical_replicas(), 6u);
  EXPECT_EQ(merged.seed(), 1234u);
  EXPECT_EQ(merged.world_size(), 6u);
  EXPECT_EQ(merged.dp_degree(), 3u);
  EXPECT_EQ(merged.created_unix_ms(), 42);
  EXPECT_EQ(merged.total_batches(), 6u * 12u);
  ASSERT_EQ(merged.lanes_size(), 6);
  ASSERT_EQ(merged.ranks_size(), 6);
  for (int i = 0; i < 6; ++i) {
    EXPECT_EQ(merged.lanes(i).lane(), static_cast<uint32_t>(i));
    EXPECT_EQ(merged.ranks(i).global_rank(), static_cast<uint32_t>(i));
  }
}

TEST(RoundStateTest, PeersOnTwoDaemonsReportingTheSameLanesAreDeduplicated) {
  RunShape shape;  // groups of ranks {0,1}, {2,3}, {4,5}
  RoundState state;
  // Each group's two ranks live on different daemons: both report the group's lanes.
  ASSERT_TRUE(state.Apply(MakeReport(shape, "node-a", {0, 2, 4})).ok());
  ASSERT_TRUE(state.Apply(MakeReport(shape, "node-b", {1, 3, 5})).ok());
  EXPECT_TRUE(state.IsComplete());
  EXPECT_EQ(state.Merge(0).lanes_size(), 6);
}

TEST(RoundStateTest, IdenticalRetryIsANoop) {
  RunShape shape;
  RoundState state;
  const proto::CheckpointReport report = MakeReport(shape, "node-a", {0, 1});
  ASSERT_TRUE(state.Apply(report).ok());
  EXPECT_TRUE(state.Apply(report).ok());
  EXPECT_TRUE(state.Contains(report));
}

TEST(RoundStateTest, DuplicateRankNamesRankAndDaemons) {
  RunShape shape;
  RoundState state;
  ASSERT_TRUE(state.Apply(MakeReport(shape, "node-a", {0, 1})).ok());
  const absl::Status s = state.Apply(MakeReport(shape, "node-b", {1, 2, 3}));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(MessageHas(s, "rank 1 reported twice (by node-a and node-b)"));
}

TEST(RoundStateTest, DisagreeingHeadersNameFieldAndDaemons) {
  RunShape shape;
  struct Case {
    const char* field;
    void (*mutate)(proto::CheckpointReport*);
  };
  const Case cases[] = {
      {"world_size", [](proto::CheckpointReport* r) { r->set_world_size(8); }},
      {"canonical_replicas", [](proto::CheckpointReport* r) { r->set_canonical_replicas(12); }},
      {"spec_hash", [](proto::CheckpointReport* r) { r->set_spec_hash("other"); }},
      {"aggregate_dir", [](proto::CheckpointReport* r) { r->set_aggregate_dir("/elsewhere"); }},
  };
  for (const Case& c : cases) {
    RoundState state;
    ASSERT_TRUE(state.Apply(MakeReport(shape, "node-a", {0, 1})).ok());
    proto::CheckpointReport other = MakeReport(shape, "node-b", {2, 3});
    c.mutate(&other);
    const absl::Status s = state.Apply(other);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << c.field;
    EXPECT_TRUE(MessageHas(s, std::string("reports disagree on ") + c.field + ": daemon node-b"));
    EXPECT_TRUE(MessageHas(s, "but node-a says"));
  }
}

TEST(RoundStateTest, DpPeersWithDifferentCountsFailNamingRanksAndCounts) {
  RunShape shape;
  RoundState state;
  proto::CheckpointReport a = MakeReport(shape, "node-a", {0});
  proto::CheckpointReport b = MakeReport(shape, "node-b", {1});
  b.mutable_ranks(0)->set_taken(11);
  for (auto& l : *b.mutable_lanes()) l.set_next_batch_index(11);
  ASSERT_TRUE(state.Apply(a).ok());
  const absl::Status s = state.Apply(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(MessageHas(s,
                         "checkpoint round 0 of run run-1: DP group 0: rank 0 took 12 "
                         "batches but rank 1 took 11 — did every rank call "
                         "checkpoint() at the same step?"));
  EXPECT_TRUE(MessageHas(s, "rank 0 on node-a, rank 1 on node-b"));
}

TEST(RoundStateTest, DpPeersMismatchWithinOneReportIsCaughtToo) {
  RunShape shape;
  RoundState state;
  proto::CheckpointReport a = MakeReport(shape, "node-a", {2, 3});
  a.mutable_ranks(1)->set_taken(13);
  const absl::Status s = state.Apply(a);
  EXPECT_TRUE(MessageHas(s, "DP group 1: rank 2 took 12 batches but rank 3 took 13"));
}

TEST(RoundStateTest, LaneClaimedWithDifferentProgressNamesLaneAndDaemons) {
  RunShape shape;
  RoundState state;
  ASSERT_TRUE(state.Apply(MakeReport(shape, "node-a", {0, 1})).ok());
  proto::CheckpointReport b = MakeReport(shape, "node-b", {2, 3});
  b.mutable_lanes(0)->set_lane(1);  // group 1 claims lane 1 of group 0...
  b.mutable_lanes(0)->set_records_into_group(3);  // ...at another position
  const absl::Status s = state.Apply(b);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(MessageHas(s, "lane 1 reported with different progress by node-a"));
  EXPECT_TRUE(MessageHas(s, "and node-b"));
}

TEST(RoundStateTest, OutOfRangeRanksAndLanesAreInvalid) {
  RunShape shape;
  {
    RoundState state;
    proto::CheckpointReport r = MakeReport(shape, "node-a", {0, 1});
    r.mutable_ranks(1)->set_global_rank(6);
    EXPECT_TRUE(MessageHas(state.Apply(r), "rank 6, outside world_size 6"));
  }
  {
    RoundState state;
    proto::CheckpointReport r = MakeReport(shape, "node-a", {0, 1});
    r.mutable_lanes(0)->set_lane(6);
    EXPECT_TRUE(MessageHas(state.Apply(r), "lane 6, outside canonical_replicas 6"));
  }
  {
    RoundState state;
    proto::CheckpointReport r = MakeReport(shape, "node-a", {});
    EXPECT_EQ(state.Apply(r).code(), absl::StatusCode::kInvalidArgument);
  }
}

TEST(RoundStateTest, LateReportMustMatchTheCompletedRound) {
  RunShape shape;
  RoundState state;
  ASSERT_TRUE(state.Apply(MakeReport(shape, "node-a", {0, 1, 2})).ok());
  ASSERT_TRUE(state.Apply(MakeReport(shape, "node-b", {3, 4, 5})).ok());
  ASSERT_TRUE(state.IsComplete());
  EXPECT_TRUE(state.CheckConsistent(MakeReport(shape, "node-b", {3, 4, 5})).ok());
  // Same progress, other split across daemons: consistent (deterministic data).
  EXPECT_TRUE(state.CheckConsistent(MakeReport(shape, "node-x", {4, 5})).ok());
  RunShape restarted = shape;
  restarted.taken = 3;
  const absl::Status s = state.CheckConsistent(MakeReport(restarted, "node-b", {3, 4, 5}));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(MessageHas(s, "restarted under the same run_id"));
}

}  // namespace
}  // namespace zephon::checkpoint
