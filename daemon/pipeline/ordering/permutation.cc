#include "daemon/pipeline/ordering/permutation.h"

#include "common/mix.h"

namespace zephon::pipeline {

Permutation::Permutation(uint64_t n, uint64_t seed) : n_(n), half_bits_(0) {
  // Smallest h with 4^h >= n; 4^32 would overflow, so cap at h = 32 (covers all n).
  while (half_bits_ < 32 && (uint64_t{1} << (2 * half_bits_)) < n) ++half_bits_;
  half_mask_ = half_bits_ == 0 ? 0 : (half_bits_ >= 64 ? ~uint64_t{0} : (uint64_t{1} << half_bits_) - 1);
  for (uint64_t r = 0; r < 4; ++r) keys_[r] = Combine(seed, r);
}

uint64_t Permutation::Encrypt(uint64_t x) const {
  uint64_t left = (x >> half_bits_) & half_mask_;
  uint64_t right = x & half_mask_;
  for (int r = 0; r < 4; ++r) {
    const uint64_t next = left ^ (Combine(keys_[r], right) & half_mask_);
    left = right;
    right = next;
  }
  return (left << half_bits_) | right;
}

uint64_t Permutation::Decrypt(uint64_t x) const {
  uint64_t left = (x >> half_bits_) & half_mask_;
  uint64_t right = x & half_mask_;
  for (int r = 3; r >= 0; --r) {  // Encrypt's rounds undone: (L, R) was (R0, L0 ^ F(R0))
    const uint64_t prev_left = right ^ (Combine(keys_[r], left) & half_mask_);
    right = left;
    left = prev_left;
  }
  return (left << half_bits_) | right;
}

uint64_t Permutation::Inverse(uint64_t y) const {
  if (n_ <= 1) return 0;
  uint64_t x = y;
  do {
    x = Decrypt(x);
  } while (x >= n_);
  return x;
}

uint64_t Permutation::Permute(uint64_t i) const {
  if (n_ <= 1) return 0;
  uint64_t x = i;
  do {
    x = Encrypt(x);
  } while (x >= n_);
  return x;
}

}  // namespace zephon::pipeline
