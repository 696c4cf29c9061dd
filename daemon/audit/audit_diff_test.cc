#include "daemon/audit/audit_diff.h"

#include <vector>

#include "gtest/gtest.h"

namespace zephon::audit {
namespace {

proto::AuditRecord Batch(uint32_t lane, uint64_t j, uint64_t doc, uint32_t c = 2) {
  proto::AuditRecord r;
  r.set_canonical_replicas(c);
  r.set_spec_hash("h");
  r.set_lane(lane);
  r.set_lane_batch_index(j);
  r.set_token_sha256(std::string(32, static_cast<char>(doc)));
  for (uint64_t v : {uint64_t{0}, uint64_t{0}, doc}) r.add_sample_ids(v);
  return r;
}

// `steps` steps of two lanes x k batches; doc = 100 * lane + j.
std::vector<proto::AuditRecord> TwoLaneRun(uint64_t batches_per_lane) {
  std::vector<proto::AuditRecord> out;
  for (uint64_t j = 0; j < batches_per_lane; ++j) {
    for (uint32_t lane = 0; lane < 2; ++lane) out.push_back(Batch(lane, j, 100 * lane + j));
  }
  return out;
}

TEST(AuditDiffTest, IdenticalRunsResumedInAnotherOrderHaveNoDifference) {
  std::vector<proto::AuditRecord> a = TwoLaneRun(10);
  // B published lane 1 first and republished two batches after a restart.
  std::vector<proto::AuditRecord> b(a.rbegin(), a.rend());
  b.push_back(Batch(0, 4, 4));
  b.push_back(Batch(1, 4, 104));
  auto ia = IndexRun(a), ib = IndexRun(b);
  ASSERT_TRUE(ia.ok() && ib.ok());
  auto report = DiffRuns(*ia, *ib, 2);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->steps_compared, 10u);
  EXPECT_FALSE(report->first_difference.has_value());
  EXPECT_EQ(report->differing_steps, 0u);
  // Steps of 4 batches: 2 per lane, 5 steps.
  report = DiffRuns(*ia, *ib, 4);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->steps_compared, 5u);
}

TEST(AuditDiffTest, TheFirstDifferingStepAndItsSamplesAreNamed) {
  std::vector<proto::AuditRecord> a = TwoLaneRun(10), b = TwoLaneRun(10);
  for (auto& r : b) {
    if (r.lane() == 1 && r.lane_batch_index() >= 6) {
      r = Batch(1, r.lane_batch_index(), 900 + r.lane_batch_index());
    }
  }
  auto report = DiffRuns(*IndexRun(a), *IndexRun(b), 4);
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->first_difference.has_value());
  EXPECT_EQ(report->first_difference->step, 3u);  // lane batch 6 = step 3 of 2 per lane
  EXPECT_EQ(report->first_difference->lane, 1u);
  EXPECT_EQ(report->first_difference->lane_batch, 6u);
  EXPECT_EQ(report->first_difference->only_in_a,
            (std::vector<std::vector<uint64_t>>{{0, 0, 106}}));
  EXPECT_EQ(report->first_difference->only_in_b,
            (std::vector<std::vector<uint64_t>>{{0, 0, 906}}));
  EXPECT_EQ(report->differing_steps, 2u);  // steps 3 and 4
  // A range before the change: nothing differs.
  report = DiffRuns(*IndexRun(a), *IndexRun(b), 4, 0, 3);
  ASSERT_TRUE(report.ok());
  EXPECT_FALSE(report->first_difference.has_value());
  EXPECT_EQ(report->steps_compared, 3u);
}

TEST(AuditDiffTest, IncompleteStepsAreListedNotCompared) {
  std::vector<proto::AuditRecord> a = TwoLaneRun(10), b = TwoLaneRun(6);
  b.pop_back();  // step 2 (of 2 per lane) lacks lane 1 batch 5
  auto report = DiffRuns(*IndexRun(a), *IndexRun(b), 4);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->steps_compared, 2u);
  EXPECT_EQ(report->only_a, (std::vector<uint64_t>{2, 3, 4}));
  EXPECT_TRUE(report->only_b.empty());
}

TEST(AuditDiffTest, ARunThatPublishedOneBatchTwiceDifferentlyIsDataLoss) {
  std::vector<proto::AuditRecord> a = TwoLaneRun(3);
  a.push_back(Batch(0, 1, 77));
  EXPECT_EQ(IndexRun(a).status().code(), absl::StatusCode::kDataLoss);
  std::vector<proto::AuditRecord> mixed = TwoLaneRun(2);
  mixed.push_back(Batch(0, 9, 1, /*c=*/4));
  EXPECT_EQ(IndexRun(mixed).status().code(), absl::StatusCode::kFailedPrecondition);
  auto four = IndexRun({Batch(0, 0, 1, 4)});
  EXPECT_EQ(DiffRuns(*IndexRun(TwoLaneRun(2)), *four, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DiffRuns(*IndexRun(TwoLaneRun(2)), *IndexRun(TwoLaneRun(2)), 3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zephon::audit
