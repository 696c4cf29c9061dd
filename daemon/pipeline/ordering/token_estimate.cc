#include "daemon/pipeline/ordering/token_estimate.h"

#include "absl/strings/str_cat.h"

namespace zephon::pipeline {

double EstimateTokensPerSample(const Dataset& dataset) {
  const uint64_t n = dataset.NumSamples();
  const uint64_t measured = n < kTokenEstimateSamples ? n : kTokenEstimateSamples;
  // Global indices ascend with i, so one forward walk over the shards finds them all.
  uint64_t tokens = 0;
  uint32_t shard = 0;
  uint64_t shard_begin = 0;  // Global index of `shard`'s first sample.
  for (uint64_t i = 0; i < measured; ++i) {
    const uint64_t global = static_cast<uint64_t>(
        static_cast<unsigned __int128>(i) * n / measured);
    while (global >= shard_begin + dataset.ShardSamples(shard)) {
      shard_begin += dataset.ShardSamples(shard);
      ++shard;
    }
    tokens += dataset.SampleLength(shard, global - shard_begin);
  }
  return measured == 0 ? 0.0 : static_cast<double>(tokens) / static_cast<double>(measured);
}

absl::StatusOr<std::vector<double>> SampleWeightsForTokenShares(
    const std::vector<double>& token_weights,
    const std::vector<std::shared_ptr<const Dataset>>& datasets,
    const std::vector<double>& tokens_per_sample) {
  std::vector<double> out;
  for (size_t k = 0; k < datasets.size(); ++k) {
    if (!(tokens_per_sample[k] > 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "work_source.weight_by 'tokens': dataset '", datasets[k]->name(),
          "' has 0 tokens per sample in its measured samples, so no sample weight gives it "
          "a token share. Remove it from the mixture or use weight_by 'samples'"));
    }
    // Without weights: total tokens N_k * t_k, divided by t_k again (see the header).
    out.push_back(token_weights.empty() ? static_cast<double>(datasets[k]->NumSamples())
                                        : token_weights[k] / tokens_per_sample[k]);
  }
  return out;
}

}  // namespace zephon::pipeline
