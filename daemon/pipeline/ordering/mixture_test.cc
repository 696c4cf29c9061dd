#include "daemon/pipeline/ordering/mixture.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

namespace zephon::pipeline {
namespace {

TEST(NormalizeWeightsTest, SumsToExactlyTwoToThe32) {
  for (const auto& w : std::vector<std::vector<double>>{
           {1}, {1, 1, 1}, {0.7, 0.2, 0.1}, {3, 1e-6, 5}, {1, 2, 3, 4, 5, 6, 7}}) {
    auto n = NormalizeWeights(w);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(std::accumulate(n->begin(), n->end(), uint64_t{0}), kWeightOne);
    for (uint64_t x : *n) EXPECT_GT(x, 0u);
  }
}

TEST(NormalizeWeightsTest, ThreeEqualWeightsGiveTheRemainderToTheLowestIndex) {
  auto n = NormalizeWeights({1, 1, 1});
  ASSERT_TRUE(n.ok());
  EXPECT_EQ((*n)[0], 1431655766u);
  EXPECT_EQ((*n)[1], 1431655765u);
  EXPECT_EQ((*n)[2], 1431655765u);
}

TEST(NormalizeWeightsTest, RejectsBadWeightsNamingTheIndex) {
  EXPECT_FALSE(NormalizeWeights({}).ok());
  auto s = NormalizeWeights({1, 0});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("weights[1]"), std::string::npos);
  EXPECT_FALSE(NormalizeWeights({1, -2}).ok());
  EXPECT_FALSE(NormalizeWeights({1, NAN}).ok());
  EXPECT_FALSE(NormalizeWeights({1, 1e-12}).ok());
}

void CheckSchedule(const std::vector<double>& w, uint64_t cs, bool within_one) {
  MixtureSchedule s(NormalizeWeights(w).value(), cs);
  std::vector<uint64_t> prev(w.size(), 0), cur, q;
  for (uint64_t n = 1; n <= 500; ++n) {
    s.Cumulative(n, &cur);
    s.Quotas(n - 1, &q);
    uint64_t sum = 0, qsum = 0;
    for (size_t k = 0; k < w.size(); ++k) {
      sum += cur[k];
      qsum += q[k];
      ASSERT_GE(cur[k], prev[k]) << "A_" << k << " not monotone at n=" << n;
      ASSERT_EQ(q[k], cur[k] - prev[k]);
      const long double t = static_cast<long double>(s.weights()[k]) * cs * n / kWeightOne;
      ASSERT_GE(static_cast<long double>(cur[k]), std::floor(t)) << "lower quota, n=" << n;
      const long double slack = within_one ? 1 : static_cast<long double>(w.size() - 1);
      ASSERT_LT(std::fabs(static_cast<long double>(cur[k]) - t), slack + 1e-9)
          << "k=" << k << " n=" << n;
    }
    ASSERT_EQ(sum, cs * n);
    ASSERT_EQ(qsum, cs);
    prev = cur;
  }
}

TEST(MixtureScheduleTest, TwoComponentsTrackWeightsWithinOne) {
  CheckSchedule({0.7, 0.3}, 10, true);
  CheckSchedule({1, 1000}, 7, true);
  CheckSchedule({0.001, 0.999}, 3, true);
}

TEST(MixtureScheduleTest, ManyComponentsAreExactMonotoneAndNearProportional) {
  CheckSchedule({0.5, 0.3, 0.2}, 10, false);
  CheckSchedule({1, 2, 3, 4, 5}, 13, false);
  CheckSchedule({1e-4, 1, 1e-3}, 1, false);
}

TEST(MixtureScheduleTest, LastChunkWithinIsTheLargestFittingN) {
  MixtureSchedule s(NormalizeWeights({1, 3}).value(), 4);
  // Component 0 gets exactly 1 per chunk of 4.
  EXPECT_EQ(s.LastChunkWithin(0, 10, 1000), 10u);
  EXPECT_EQ(s.LastChunkWithin(1, 10, 1000), 3u);
  EXPECT_EQ(s.LastChunkWithin(1, 10, 2), 2u);
}

}  // namespace
}  // namespace zephon::pipeline
