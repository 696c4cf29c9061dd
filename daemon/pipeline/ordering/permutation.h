// Permutation: an O(1)-memory, random-access pseudo-random bijection on [0, n).
//
// Algorithm (part of the determinism contract; changing it needs a format_version
// bump): let h = the smallest integer with 4^h >= n (h = 0 for n <= 1), so the domain
// is 2h bits split into two h-bit halves (L = high, R = low). Round keys are
// k_r = Combine(seed, r) for r = 0..3. One Feistel pass does 4 rounds of
//   (L, R) <- (R, L xor (Combine(k_r, R) & (2^h - 1))).
// Permute(i) applies passes starting from x = i until x < n (cycle walking); since
// 4^h < 4n, a few passes are expected. Every shuffle in the engine uses this, so
// seeking into a shuffled order is O(1). Thread-safe (immutable).
#ifndef ZEPHON_DAEMON_PIPELINE_ORDERING_PERMUTATION_H_
#define ZEPHON_DAEMON_PIPELINE_ORDERING_PERMUTATION_H_

#include <cstdint>

namespace zephon::pipeline {

class Permutation {
 public:
  Permutation(uint64_t n, uint64_t seed);

  uint64_t size() const { return n_; }
  // The image of i. REQUIRES: i < size().
  uint64_t Permute(uint64_t i) const;
  // The i with Permute(i) == y (the Feistel rounds run backwards, cycle walking the
  // same way). REQUIRES: y < size().
  uint64_t Inverse(uint64_t y) const;

 private:
  uint64_t Encrypt(uint64_t x) const;
  uint64_t Decrypt(uint64_t x) const;

  uint64_t n_;
  uint32_t half_bits_;
  uint64_t half_mask_;
  uint64_t keys_[4];
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_ORDERING_PERMUTATION_H_
