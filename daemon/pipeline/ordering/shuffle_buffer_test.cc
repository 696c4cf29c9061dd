#include "daemon/pipeline/ordering/shuffle_buffer.h"

#include <algorithm>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace zephon::pipeline {
namespace {

std::vector<uint64_t> Order(ShuffleAlgorithm algorithm, uint64_t buffer_size, uint64_t n,
                            uint64_t key = 77, double growth = kDefaultWarmupGrowth) {
  ShuffleOptions o;
  o.buffer_size = buffer_size;
  o.algorithm = algorithm;
  o.warmup_growth = growth;
  std::vector<uint64_t> order;
  ShuffleOrder(o, key, n, &order);
  return order;
}

bool IsPermutation(std::vector<uint64_t> order) {
  std::sort(order.begin(), order.end());
  for (uint64_t i = 0; i < order.size(); ++i) {
    if (order[i] != i) return false;
  }
  return true;
}

// The streaming algorithm is the shuffle every spec without `algorithm` ran before
// algorithms existed: these orders were recorded from that implementation, so a
// change here moves every shuffled pipeline's batches.
TEST(ShuffleBufferTest, StreamingIsTheHistoricalShuffle) {
  const std::vector<std::vector<uint64_t>> golden = {
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19},
      {1, 2, 0, 4, 6, 3, 8, 7, 10, 11, 9, 13, 12, 15, 5, 16, 17, 18, 14, 19},
      {0, 6, 1, 9, 7, 11, 10, 13, 12, 4, 8, 2, 14, 17, 15, 18, 5, 16, 19, 3},
      {2, 11, 15, 18, 5, 4, 8, 7, 16, 12, 6, 14, 13, 9, 0, 19, 17, 10, 1, 3}};
  const uint64_t sizes[] = {1, 3, 7, 64};
  for (int t = 0; t < 4; ++t) {
    std::vector<SampleId> ids;
    for (uint32_t i = 0; i < 20; ++i) ids.push_back(SampleId{0, 0, i});
    BufferShuffle(sizes[t], ShuffleKey(5, 2, 16), &ids);
    std::vector<uint64_t> got;
    for (const SampleId& id : ids) got.push_back(id.index);
    EXPECT_EQ(got, golden[t]) << "buffer_size " << sizes[t];
  }
}

TEST(ShuffleBufferTest, EveryAlgorithmIsAPermutationAndDeterministic) {
  for (ShuffleAlgorithm a : {ShuffleAlgorithm::kStreaming, ShuffleAlgorithm::kBlock,
                             ShuffleAlgorithm::kBlockWarmup}) {
    for (uint64_t bs : {1, 2, 5, 64, 1000}) {
      for (uint64_t n : {0, 1, 7, 100, 333}) {
        const std::vector<uint64_t> order = Order(a, bs, n);
        ASSERT_EQ(order.size(), n);
        EXPECT_TRUE(IsPermutation(order)) << ShuffleAlgorithmName(a) << " " << bs << " " << n;
        EXPECT_EQ(order, Order(a, bs, n));
      }
    }
    // Another key, another order (n large enough that equality would be a fluke).
    EXPECT_NE(Order(a, 64, 300, 1), Order(a, 64, 300, 2)) << ShuffleAlgorithmName(a);
  }
}

TEST(ShuffleBufferTest, BlockPermutesWithinTumblingBlocks) {
  const std::vector<uint64_t> order = Order(ShuffleAlgorithm::kBlock, 10, 35);
  for (uint64_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(order[i] / 10, i / 10) << "output " << i << " left its block";
  }
  std::vector<uint64_t> identity(35);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(order, identity);
}

TEST(ShuffleBufferTest, BlockWarmupRampsFromTheWarmupWindow) {
  EXPECT_EQ(FirstWarmupBlock(1), 1u);
  EXPECT_EQ(FirstWarmupBlock(160), 10u);
  EXPECT_EQ(FirstWarmupBlock(8192), 128u);
  // buffer_size 160: blocks of 10, 15, 22, 33, 49, 73, 109, 160, 160...
  const std::vector<uint64_t> bounds = {0, 10, 25, 47, 80, 129, 202, 311, 471, 631};
  const std::vector<uint64_t> order = Order(ShuffleAlgorithm::kBlockWarmup, 160, 631);
  for (size_t b = 0; b + 1 < bounds.size(); ++b) {
    for (uint64_t i = bounds[b]; i < bounds[b + 1]; ++i) {
      EXPECT_GE(order[i], bounds[b]);
      EXPECT_LT(order[i], bounds[b + 1]);
    }
  }
  // A growth that rounds down to no growth still grows by one item per block.
  const std::vector<uint64_t> slow = Order(ShuffleAlgorithm::kBlockWarmup, 32, 5, 3, 1.01);
  EXPECT_EQ(slow[0], 0u);  // First block: 2 items (32 / 16).
  EXPECT_LT(slow[1], 2u);
  EXPECT_GE(slow[2], 2u);
}

TEST(ShuffleBufferTest, ParsesUpstreamNames) {
  EXPECT_EQ(*ParseShuffleAlgorithm(""), ShuffleAlgorithm::kStreaming);
  EXPECT_EQ(*ParseShuffleAlgorithm("streaming"), ShuffleAlgorithm::kStreaming);
  EXPECT_EQ(*ParseShuffleAlgorithm("block"), ShuffleAlgorithm::kBlock);
  EXPECT_EQ(*ParseShuffleAlgorithm("block_warmup"), ShuffleAlgorithm::kBlockWarmup);
  const auto bad = ParseShuffleAlgorithm("reservoir");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'reservoir'"), std::string::npos);
  EXPECT_NE(RowShuffleKey(1, 2, 3), ShuffleKey(1, 2, 3));
}

}  // namespace
}  // namespace zephon::pipeline
