#include "tests/bench/ring/bench_util.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "gtest/gtest.h"

namespace zephon::shm::bench {
namespace {

TEST(SummarizeTest, NearestRankPercentiles) {
  std::vector<uint64_t> samples;
  for (uint64_t i = 100; i >= 1; --i) samples.push_back(i);  // unsorted on purpose
  const LatencyStats s = Summarize(samples);
  EXPECT_EQ(s.count, 100u);
  EXPECT_EQ(s.p50_ns, 50u);
  EXPECT_EQ(s.p99_ns, 99u);
  EXPECT_EQ(s.max_ns, 100u);
  EXPECT_DOUBLE_EQ(s.mean_ns, 50.5);
}

TEST(SummarizeTest, EmptyIsAllZero) {
  const LatencyStats s = Summarize({});
  EXPECT_EQ(s.count, 0u);
  EXPECT_EQ(s.max_ns, 0u);
}

TEST(SumWordsTest, MatchesAScalarSumIncludingTheTail) {
  for (uint64_t bytes : {0u, 8u, 64u, 72u, 4096u, 4160u + 24u}) {
    std::vector<uint64_t> words(bytes / 8 + 1);
    FillPattern(words.data(), bytes);
    uint64_t expected = 0;
    for (uint64_t i = 0; i < bytes / 8; ++i) expected += words[i];
    EXPECT_EQ(SumWords(words.data(), bytes), expected) << bytes;
  }
}

TEST(FillPatternTest, IsDeterministic) {
  std::vector<uint8_t> a(1000), b(1000);
  FillPattern(a.data(), a.size());
  FillPattern(b.data(), b.size());
  EXPECT_EQ(a, b);
  EXPECT_NE(SumWords(a.data(), a.size()), 0u);
}

}  // namespace
}  // namespace zephon::shm::bench
