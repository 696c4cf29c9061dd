// Tokens per sample of a dataset, for token-weighted mixtures (weight_by TOKENS).
//
// Rule (deterministic: a pure function of the dataset's sample-length table, so every
// rank and every resume measures the same value):
//   N = the dataset's sample count, M = kTokenEstimateSamples (4096).
//   N <= M: every sample (the estimate is the exact mean).
//   N > M:  the M samples at global indices floor(i * N / M), i = 0..M-1, evenly spaced
//           over the dataset's shards in shard order (global index = shards before it
//           plus the index inside its shard; the shuffled order plays no part).
//   estimate = (sum of SampleLength over those samples) / (their count), as a double.
// SampleLength is what the pipeline reads: for pre-tokenized formats (Megatron, flat,
// JSONL token arrays) the index's lengths; for a text dataset, its token cache's.
//
// Token-weighted sample weights: with token proportions w_k and estimates t_k, dataset
// k's sample weight is w_k / t_k (then NormalizeWeights), so its share of drawn tokens
// is w_k up to the estimate's error. Without explicit weights, "tokens" weighs each
// dataset by its estimated total tokens N_k * t_k, whose sample weight N_k * t_k / t_k
// = N_k is samples-proportional mixing: the same chunks as weight_by SAMPLES.
// Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_ORDERING_TOKEN_ESTIMATE_H_
#define ZEPHON_DAEMON_PIPELINE_ORDERING_TOKEN_ESTIMATE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/dataset.h"

namespace zephon::pipeline {

inline constexpr uint64_t kTokenEstimateSamples = 4096;

// The estimate of the rule above (0 when every measured sample is empty).
double EstimateTokensPerSample(const Dataset& dataset);

// Sample weights for the token proportions `token_weights` (empty = each dataset's
// estimated total tokens), given `tokens_per_sample` (one per dataset, from
// EstimateTokensPerSample). INVALID_ARGUMENT naming the dataset when its estimate is 0
// (its measured samples hold no token, so no sample weight reaches a token share).
// REQUIRES: token_weights empty or one per dataset; tokens_per_sample one per dataset.
absl::StatusOr<std::vector<double>> SampleWeightsForTokenShares(
    const std::vector<double>& token_weights,
    const std::vector<std::shared_ptr<const Dataset>>& datasets,
    const std::vector<double>& tokens_per_sample);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_ORDERING_TOKEN_ESTIMATE_H_
