#include "daemon/pipeline/ordering/token_estimate.h"

#include <gtest/gtest.h>

#include "daemon/pipeline/formats/testing_corpus.h"

namespace zephon::pipeline {
namespace {

using testing::MakeMemoryDataset;
using testing::MakeSyntheticDataset;

// A dataset whose shard s holds samples of lengths[s][i] tokens.
std::shared_ptr<const Dataset> WithLengths(const std::string& name,
                                           const std::vector<std::vector<uint32_t>>& lengths) {
  std::vector<std::vector<std::vector<int32_t>>> shards;
  for (const auto& shard : lengths) {
    shards.emplace_back();
    for (uint32_t len : shard) shards.back().push_back(std::vector<int32_t>(len, 7));
  }
  return MakeMemoryDataset(name, shards);
}

TEST(TokenEstimateTest, SmallDatasetIsTheExactMean) {
  // 3 + 5 + 1 + 9 + 2 = 20 tokens over 5 samples, across shards.
  EXPECT_EQ(EstimateTokensPerSample(*WithLengths("d", {{3, 5}, {1}, {9, 2}})), 4.0);
  // Exactly kTokenEstimateSamples samples: still every one.
  std::vector<uint32_t> lengths(kTokenEstimateSamples, 2);
  lengths.back() = 2 + kTokenEstimateSamples;  // Adds exactly one token per sample.
  EXPECT_EQ(EstimateTokensPerSample(*WithLengths("d", {lengths})), 3.0);
  EXPECT_EQ(EstimateTokensPerSample(*WithLengths("empty", {{0, 0}})), 0.0);
}

TEST(TokenEstimateTest, LargeDatasetSamplesEvenlySpacedGlobalIndices) {
  // 2 * M samples: the measured ones are the even global indices. Shard 0 holds
  // lengths 1 at even and 1001 at odd indices, so only the 1s are measured; shard 1
  // (second half) holds 5s. Mean (M/2 * 1 + M/2 * 5) / M = 3.
  std::vector<uint32_t> first(kTokenEstimateSamples);
  for (size_t i = 0; i < first.size(); ++i) first[i] = i % 2 == 0 ? 1 : 1001;
  std::vector<uint32_t> second(kTokenEstimateSamples, 5);
  const auto ds = WithLengths("big", {first, second});
  EXPECT_EQ(EstimateTokensPerSample(*ds), 3.0);
  // Deterministic: the same data gives bit-identical estimates, whatever the object.
  const auto again = WithLengths("big", {first, second});
  EXPECT_EQ(EstimateTokensPerSample(*again), EstimateTokensPerSample(*ds));
  // N = 3 * 2731 = 8193, not a multiple of M: the floor(i * N / M) indices.
  const auto synthetic = MakeSyntheticDataset("syn", 1, 3, 2731, 300);
  uint64_t tokens = 0;
  const uint64_t n = synthetic->NumSamples();
  for (uint64_t i = 0; i < kTokenEstimateSamples; ++i) {
    const uint64_t g = i * n / kTokenEstimateSamples;
    tokens += synthetic->SampleLength(static_cast<uint32_t>(g / 2731), g % 2731);
  }
  EXPECT_EQ(EstimateTokensPerSample(*synthetic),
            static_cast<double>(tokens) / kTokenEstimateSamples);
}

TEST(TokenEstimateTest, SampleWeightsDivideTokenSharesByTokensPerSample) {
  const auto a = WithLengths("a", {{10, 10}});
  const auto b = WithLengths("b", {{100, 100, 100}});
  auto w = SampleWeightsForTokenShares({0.5, 0.5}, {a, b}, {10, 100});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(*w, (std::vector<double>{0.05, 0.005}));
  // Without weights: total tokens per dataset, i.e. the sample counts.
  w = SampleWeightsForTokenShares({}, {a, b}, {10, 100});
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(*w, (std::vector<double>{2, 3}));
  w = SampleWeightsForTokenShares({1, 1}, {a, b}, {10, 0});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(w.status().message().find("dataset 'b' has 0 tokens per sample"),
            std::string::npos)
      << w.status();
}

}  // namespace
}  // namespace zephon::pipeline
