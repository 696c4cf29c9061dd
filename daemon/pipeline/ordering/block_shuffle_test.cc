#include "daemon/pipeline/ordering/block_shuffle.h"

#include <gtest/gtest.h>

#include <set>

#include "common/mix.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/ordering/work_source.h"

namespace zephon::pipeline {
namespace {

using testing::MakeSyntheticDataset;

TEST(BlockShuffleTest, OptionSyntaxIsValidatedNamingTheValue) {
  for (const char* ok : {"", "auto", "global", "1", "4096"}) {
    EXPECT_TRUE(ValidateBlockShuffle(ok).ok()) << ok;
  }
  for (const char* bad : {"0", "-3", "abc", "12x", " 5", "Auto", "99999999999999999999999"}) {
    const absl::Status s = ValidateBlockShuffle(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(absl::StrCat("work_source.shuffle_block_size '", bad, "'")),
              std::string::npos)
        << s;
  }
}

TEST(BlockShuffleTest, SizesResolvePerDatasetAndClampToTheDataset) {
  // Largest shard: 9 samples; dataset sizes 27 and 100.
  std::vector<std::shared_ptr<const Dataset>> ds = {MakeSyntheticDataset("a", 1, 3, 9, 4),
                                                    MakeSyntheticDataset("b", 2, 20, 5, 4)};
  EXPECT_EQ(ResolveBlockSizes("", ds).value(), (std::vector<uint64_t>{0, 0}));
  EXPECT_EQ(ResolveBlockSizes("auto", ds).value(), (std::vector<uint64_t>{27, 72}));
  EXPECT_EQ(ResolveBlockSizes("global", ds).value(), (std::vector<uint64_t>{27, 100}));
  EXPECT_EQ(ResolveBlockSizes("50", ds).value(), (std::vector<uint64_t>{27, 50}));
  EXPECT_FALSE(ResolveBlockSizes("none", ds).ok());
}

TEST(BlockShuffleTest, IsAPerPassBijectionThatStaysInsideEachBlock) {
  for (uint64_t n : {1, 2, 7, 64, 100, 1000}) {
    for (uint64_t block : {1, 3, 8, 64, 1000}) {
      std::set<uint64_t> seen;
      for (uint64_t p = 0; p < n; ++p) {
        const uint64_t q = BlockShufflePosition(p, n, block, /*pass_seed=*/42);
        ASSERT_LT(q, n);
        EXPECT_EQ(q / block, p / block) << "n=" << n << " block=" << block << " p=" << p;
        if (block == 1) {
          EXPECT_EQ(q, p);
        }
        seen.insert(q);
      }
      EXPECT_EQ(seen.size(), n) << "n=" << n << " block=" << block;
    }
  }
}

TEST(BlockShuffleTest, DiffersAcrossPassesAndBlocks) {
  const uint64_t n = 100, block = 10;
  std::vector<uint64_t> pass0, pass1;
  for (uint64_t p = 0; p < n; ++p) {
    pass0.push_back(BlockShufflePosition(p, n, block, Combine(7, 0)));
    pass1.push_back(BlockShufflePosition(p, n, block, Combine(7, 1)));
  }
  EXPECT_NE(pass0, pass1);
  // Blocks are shuffled independently: the in-block patterns are not all equal.
  std::set<std::vector<uint64_t>> patterns;
  for (uint64_t b = 0; b < n / block; ++b) {
    std::vector<uint64_t> pattern;
    for (uint64_t o = 0; o < block; ++o) pattern.push_back(pass0[b * block + o] - b * block);
    patterns.insert(pattern);
  }
  EXPECT_GT(patterns.size(), 5u);
}

std::vector<SampleId> Draws(const proto::WorkSourceSpec& spec,
                            std::shared_ptr<const Dataset> ds, uint64_t chunks) {
  auto ws = WorkSource::Create(spec, {ds});
  EXPECT_TRUE(ws.ok()) << ws.status();
  std::vector<SampleId> all, chunk;
  for (uint64_t g = 0; g < chunks; ++g) {
    (*ws)->Chunk(g, &chunk);
    all.insert(all.end(), chunk.begin(), chunk.end());
  }
  return all;
}

TEST(BlockShuffleTest, WorkSourcePermutesEachBlockOfTheShuffledOrder) {
  auto ds = MakeSyntheticDataset("a", 1, 4, 25, 4);  // N = 100.
  proto::WorkSourceSpec spec;
  auto* d = spec.add_datasets();
  d->set_name("a");
  d->set_path("/unused");
  spec.set_seed(99);
  spec.set_chunk_size(10);
  spec.set_shuffle_shards(true);
  spec.set_shuffle_within_shard(true);
  spec.set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  const auto plain = Draws(spec, ds, 30);  // Three passes.
  spec.set_shuffle_block_size("16");
  const auto blocked = Draws(spec, ds, 30);
  ASSERT_EQ(blocked.size(), 300u);
  EXPECT_NE(blocked, plain);
  for (uint64_t pass = 0; pass < 3; ++pass) {
    const auto begin = pass * 100;
    // Each pass visits every sample once ...
    EXPECT_EQ(std::set<SampleId>(blocked.begin() + begin, blocked.begin() + begin + 100).size(),
              100u);
    // ... and each block holds the same samples as without the block shuffle.
    for (uint64_t b = 0; b < 100; b += 16) {
      const uint64_t e = std::min<uint64_t>(b + 16, 100);
      EXPECT_EQ(std::set<SampleId>(blocked.begin() + begin + b, blocked.begin() + begin + e),
                std::set<SampleId>(plain.begin() + begin + b, plain.begin() + begin + e));
    }
  }
  EXPECT_FALSE(std::equal(blocked.begin(), blocked.begin() + 100, blocked.begin() + 100));
  auto ws = WorkSource::Create(spec, {ds});
  EXPECT_NE((*ws)->Describe().find("block 16"), std::string::npos) << (*ws)->Describe();
  spec.set_shuffle_block_size("sixteen");
  ws = WorkSource::Create(spec, {ds});
  ASSERT_FALSE(ws.ok());
  EXPECT_NE(ws.status().message().find("shuffle_block_size 'sixteen'"), std::string::npos);
}

TEST(BlockShuffleTest, InverseUndoesThePositionWithAShortLastBlock) {
  for (uint64_t block : {1u, 4u, 7u, 100u}) {
    const uint64_t n = 45;
    for (uint64_t p = 0; p < n; ++p) {
      const uint64_t q = BlockShufflePosition(p, n, block, 1234);
      ASSERT_EQ(BlockShuffleInverse(q, n, block, 1234), p) << "block " << block;
    }
  }
}

}  // namespace
}  // namespace zephon::pipeline
