#include "daemon/pipeline/ordering/permutation.h"

#include <gtest/gtest.h>

#include <vector>

namespace zephon::pipeline {
namespace {

void ExpectBijection(uint64_t n, uint64_t seed) {
  Permutation p(n, seed);
  std::vector<bool> hit(n, false);
  for (uint64_t i = 0; i < n; ++i) {
    const uint64_t v = p.Permute(i);
    ASSERT_LT(v, n) << "n=" << n;
    ASSERT_FALSE(hit[v]) << "n=" << n << " collision at " << v;
    hit[v] = true;
  }
}

TEST(PermutationTest, IsABijectionForSmallSizes) {
  for (uint64_t n = 1; n <= 300; ++n) ExpectBijection(n, 12345 + n);
}

TEST(PermutationTest, IsABijectionForLargeSizes) {
  for (uint64_t n : {4096ull, 65537ull, 100003ull, 1ull << 20}) ExpectBijection(n, 7);
}

TEST(PermutationTest, IsDeterministicAndSeedDependent) {
  Permutation a(1000, 42), b(1000, 42), c(1000, 43);
  int differ = 0;
  for (uint64_t i = 0; i < 1000; ++i) {
    EXPECT_EQ(a.Permute(i), b.Permute(i));
    differ += a.Permute(i) != c.Permute(i);
  }
  EXPECT_GT(differ, 900);
}

TEST(PermutationTest, IsNotTheIdentity) {
  for (uint64_t n = 8; n <= 300; ++n) {
    Permutation p(n, 99);
    int fixed = 0;
    for (uint64_t i = 0; i < n; ++i) fixed += p.Permute(i) == i;
    EXPECT_LT(fixed, static_cast<int>(n)) << "n=" << n;
  }
}

TEST(PermutationTest, HugeDomainsStayInRange) {
  const uint64_t n = (1ull << 62) + 12345;
  Permutation p(n, 1);
  for (uint64_t i = 0; i < 1000; ++i) EXPECT_LT(p.Permute(n - 1 - i), n);
}

TEST(PermutationTest, InverseUndoesPermuteForEverySizeAndSeed) {
  for (uint64_t n : {1u, 2u, 3u, 7u, 16u, 17u, 1000u, 4097u}) {
    for (uint64_t seed : {0u, 1u, 99u}) {
      const Permutation p(n, seed);
      for (uint64_t i = 0; i < n; ++i) {
        ASSERT_EQ(p.Inverse(p.Permute(i)), i) << "n " << n << " seed " << seed;
      }
    }
  }
}

}  // namespace
}  // namespace zephon::pipeline
