#include "daemon/pipeline/ordering/dataset_order.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>
#include <tuple>
#include <vector>

#include "daemon/pipeline/formats/testing_corpus.h"

namespace zephon::pipeline {
namespace {

using testing::MakeSyntheticDataset;

TEST(DatasetOrderTest, EveryPassVisitsEachSampleOnceAndLaterPassesReshuffle) {
  auto dataset = MakeSyntheticDataset("d", 1, /*num_shards=*/5, /*per_shard=*/7, 4);
  const DatasetOrder order(dataset.get(), /*dataset_index=*/3, /*dataset_seed=*/11,
                           /*shuffle_shards=*/true, /*shuffle_within_shard=*/true);
  const uint64_t n = dataset->NumSamples();
  std::vector<SampleId> first, second;
  for (uint64_t j = 0; j < n; ++j) first.push_back(order.Draw(j));
  for (uint64_t j = n; j < 2 * n; ++j) second.push_back(order.Draw(j));
  std::set<std::tuple<uint32_t, uint32_t, uint64_t>> seen;
  for (const SampleId& id : first) {
    EXPECT_EQ(id.dataset, 3u);
    seen.insert({id.dataset, id.shard, id.index});
  }
  EXPECT_EQ(seen.size(), n);
  EXPECT_NE(first, second);
}

// Concurrent draws over more passes than the cache holds (so threads evict each other's
// passes) give what a single thread gets from a fresh order.
TEST(DatasetOrderTest, AppendDrawsIsDrawOfEachAcrossPassesShardsAndBlocks) {
  auto dataset = MakeSyntheticDataset("d", 1, /*num_shards=*/4, /*per_shard=*/9, 4);
  for (bool within : {false, true}) {
    for (bool reshuffle : {false, true}) {
      for (uint64_t block : {0u, 5u}) {
        const DatasetOrder order(dataset.get(), 2, 99, /*shuffle_shards=*/true, within, block,
                                 reshuffle);
        // Ranges starting and ending mid-pass, spanning several passes (36 samples each).
        for (auto [first, count] : std::vector<std::pair<uint64_t, uint64_t>>{
                 {0, 36}, {7, 1}, {30, 50}, {100, 150}, {5, 0}}) {
          std::vector<SampleId> got = {SampleId{7, 7, 7}};  // appended to, not replaced
          order.AppendDraws(first, count, &got);
          ASSERT_EQ(got.size(), count + 1);
          for (uint64_t j = 0; j < count; ++j) {
            EXPECT_EQ(got[j + 1], order.Draw(first + j))
                << "draw " << first + j << " within " << within << " reshuffle " << reshuffle
                << " block " << block;
          }
        }
      }
    }
  }
}

TEST(DatasetOrderTest, ConcurrentDrawsAcrossEvictedPassesMatchASingleThread) {
  auto dataset = MakeSyntheticDataset("d", 1, /*num_shards=*/6, /*per_shard=*/5, 4);
  const uint64_t n = dataset->NumSamples();
  const uint64_t passes = DatasetOrder::kCachedPasses * 3;  // 12
  const DatasetOrder reference(dataset.get(), 0, 7, true, true);
  std::vector<SampleId> expected;
  for (uint64_t j = 0; j < passes * n; ++j) expected.push_back(reference.Draw(j));

  const DatasetOrder shared(dataset.get(), 0, 7, true, true);
  // Thread t visits the passes in the order i * stride[t] mod 12 (strides coprime to 12),
  // so the threads keep evicting each other's passes.
  const std::vector<uint64_t> strides = {1, 5, 7, 11};
  std::vector<std::vector<SampleId>> got(strides.size(), std::vector<SampleId>(passes * n));
  std::vector<std::thread> threads;
  for (size_t t = 0; t < strides.size(); ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < passes; ++i) {
        const uint64_t e = i * strides[t] % passes;
        for (uint64_t p = 0; p < n; ++p) got[t][e * n + p] = shared.Draw(e * n + p);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  for (size_t t = 0; t < strides.size(); ++t) EXPECT_EQ(got[t], expected) << "thread " << t;
}

TEST(DatasetOrderTest, DrawOfFindsEachSamplesDrawInEveryPass) {
  auto dataset = MakeSyntheticDataset("d", 1, /*num_shards=*/4, /*per_shard=*/9, 4);
  for (bool within : {false, true}) {
    for (bool reshuffle : {false, true}) {
      for (uint64_t block : {0u, 5u}) {
        const DatasetOrder order(dataset.get(), 2, 99, true, within, block, reshuffle);
        for (uint64_t j = 0; j < 36 * 3; ++j) {
          const SampleId id = order.Draw(j);
          ASSERT_EQ(order.DrawOf(id.shard, id.index, j / 36), j)
              << "within " << within << " reshuffle " << reshuffle << " block " << block;
        }
      }
    }
  }
}

}  // namespace
}  // namespace zephon::pipeline
