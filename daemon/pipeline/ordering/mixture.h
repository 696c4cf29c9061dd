// Mixture schedule: how many samples of each component the first n chunks hold.
//
// Weights. NormalizeWeights maps positive doubles to integers w_k summing to exactly
// 2^32: floor(2^32 * p_k) plus one for the largest fractional parts (ties -> lower
// index), p_k = weight_k / sum. A weight that normalizes to 0 is an error.
//
// Cumulative counts. With X = chunk_size * n and T_k = w_k * X / 2^32 (exact), the
// schedule is the merged sequence in which component k's j-th sample (j >= 0) has the
// key (j + 1) * 2^32 / w_k — the total at which its exact share reaches j + 1 —
// ordered by key, ties -> lower index (the Jefferson / D'Hondt divisor method).
// A_k(n) = number of component-k entries among the first X entries of that sequence.
// Computed in O(K^2) without replay: every entry with key <= X is in (floor(T_k) of
// them per component), and the remaining R = X - sum floor(T_k) < K are the next
// smallest keys. Consequences, all tested:
//   * sum_k A_k(n) = X exactly, so every chunk holds exactly chunk_size samples;
//   * A_k is monotone in n (prefix counts of one fixed sequence), so quotas are >= 0;
//   * floor(T_k(n)) <= A_k(n) <= floor(T_k(n)) + R < T_k(n) + K - 1; with two
//     components |A_k(n) - T_k(n)| < 1.
// We chose this over per-n largest-remainder because largest remainder is not
// monotone in n (Alabama paradox), which would give negative chunk quotas.
// Thread-safe (immutable).
#ifndef ZEPHON_DAEMON_PIPELINE_ORDERING_MIXTURE_H_
#define ZEPHON_DAEMON_PIPELINE_ORDERING_MIXTURE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/ordering/apportionment.h"

namespace zephon::pipeline {

inline constexpr uint64_t kWeightOne = uint64_t{1} << 32;

// INVALID_ARGUMENT (naming the index and value) for an empty list, a non-finite or
// non-positive weight, or one too small to survive normalization.
absl::StatusOr<std::vector<uint64_t>> NormalizeWeights(const std::vector<double>& weights);

class MixtureSchedule : public Apportionment {
 public:
  // REQUIRES: weights from NormalizeWeights, chunk_size >= 1.
  MixtureSchedule(std::vector<uint64_t> weights, uint64_t chunk_size);

  size_t NumComponents() const override { return weights_.size(); }
  uint64_t chunk_size() const override { return chunk_size_; }
  const std::vector<uint64_t>& weights() const { return weights_; }
  // A_k(n) for all k. REQUIRES: chunk_size * n fits in uint64.
  void Cumulative(uint64_t n, std::vector<uint64_t>* out) const override;
  // LastChunkWithin below n_max = the n past which A_k surely exceeds limit (every
  // weight is > 0, so it always does).
  std::optional<uint64_t> LastChunk(size_t k, uint64_t limit) const override;
  // Samples of each component in chunk n: A_k(n + 1) - A_k(n).
  void Quotas(uint64_t n, std::vector<uint64_t>* out) const;
  // Largest n <= max_n with A_k(n) <= limit (binary search; A_k is monotone).
  uint64_t LastChunkWithin(size_t k, uint64_t limit, uint64_t max_n) const;

 private:
  const std::vector<uint64_t> weights_;
  const uint64_t chunk_size_;
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_ORDERING_MIXTURE_H_
