#include "daemon/pipeline/ordering/mixture.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"

namespace zephon::pipeline {

using u128 = unsigned __int128;

absl::StatusOr<std::vector<uint64_t>> NormalizeWeights(const std::vector<double>& weights) {
  if (weights.empty()) return absl::InvalidArgumentError("weights: empty list");
  long double total = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    if (!std::isfinite(weights[k]) || weights[k] <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("weights[", k, "] = ", weights[k], ": must be finite and > 0"));
    }
    total += weights[k];
  }
  std::vector<uint64_t> out(weights.size());
  std::vector<long double> frac(weights.size());
  uint64_t assigned = 0;
  for (size_t k = 0; k < weights.size(); ++k) {
    const long double exact = weights[k] / total * static_cast<long double>(kWeightOne);
    out[k] = static_cast<uint64_t>(std::floor(exact));
    frac[k] = exact - std::floor(exact);
    assigned += out[k];
  }
  // Largest remainder; stable sort keeps ties in index order.
  std::vector<size_t> order(weights.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return frac[a] > frac[b]; });
  // Rounding of long double may leave assigned slightly off either way; fix exactly.
  for (size_t i = 0; assigned < kWeightOne; i = (i + 1) % order.size(), ++assigned) {
    ++out[order[i]];
  }
  for (size_t i = order.size(); assigned > kWeightOne; --assigned) {
    i = (i + order.size() - 1) % order.size();
    while (out[order[i]] == 0) i = (i + order.size() - 1) % order.size();
    --out[order[i]];
  }
  for (size_t k = 0; k < out.size(); ++k) {
    if (out[k] == 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "weights[", k, "] = ", weights[k], " is too small relative to the total ",
          static_cast<double>(total), " (share < 2^-32)"));
    }
  }
  return out;
}

MixtureSchedule::MixtureSchedule(std::vector<uint64_t> weights, uint64_t chunk_size)
    : weights_(std::move(weights)), chunk_size_(chunk_size) {}

void MixtureSchedule::Cumulative(uint64_t n, std::vector<uint64_t>* out) const {
  const size_t num = weights_.size();
  out->assign(num, 0);
  const uint64_t total = chunk_size_ * n;
  uint64_t assigned = 0;
  for (size_t k = 0; k < num; ++k) {
    (*out)[k] = static_cast<uint64_t>((u128{weights_[k]} * total) >> 32);
    assigned += (*out)[k];
  }
  // The next entry of component k has key ((*out)[k] + 1) / w_k; take the R smallest.
  for (; assigned < total; ++assigned) {
    size_t best = 0;
    for (size_t k = 1; k < num; ++k) {
      const u128 lhs = u128{(*out)[k] + 1} * weights_[best];
      const u128 rhs = u128{(*out)[best] + 1} * weights_[k];
      if (lhs < rhs) best = k;  // Strict: ties keep the lower index.
    }
    ++(*out)[best];
  }
}

void MixtureSchedule::Quotas(uint64_t n, std::vector<uint64_t>* out) const {
  std::vector<uint64_t> before;
  Cumulative(n, &before);
  Cumulative(n + 1, out);
  for (size_t k = 0; k < out->size(); ++k) (*out)[k] -= before[k];
}

std::optional<uint64_t> MixtureSchedule::LastChunk(size_t k, uint64_t limit) const {
  // A_k(n) >= floor(w_k * cs * n / 2^32), so n = (limit + 1) * 2^32 / (w_k * cs) + 1
  // already exceeds it: search below that, and below the n where chunk_size * n would
  // overflow.
  const u128 bound = ((u128{limit} + 1) << 32) / (u128{weights_[k]} * chunk_size_) + 1;
  const uint64_t overflow_cap = std::numeric_limits<uint64_t>::max() / chunk_size_ - 1;
  const uint64_t max_n = bound > overflow_cap ? overflow_cap : static_cast<uint64_t>(bound);
  return LastChunkWithin(k, limit, max_n);
}

uint64_t MixtureSchedule::LastChunkWithin(size_t k, uint64_t limit, uint64_t max_n) const {
  std::vector<uint64_t> a;
  uint64_t lo = 0, hi = max_n;  // Invariant: A_k(lo) <= limit (A_k(0) = 0).
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    Cumulative(mid, &a);
    if (a[k] <= limit) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace zephon::pipeline
