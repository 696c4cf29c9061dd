#include "daemon/pipeline/ordering/work_source.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/mix.h"
#include "common/status_macros.h"
#include "daemon/pipeline/ordering/block_shuffle.h"
#include "daemon/pipeline/ordering/token_estimate.h"
#include "daemon/pipeline/spec_string_form.h"

namespace zephon::pipeline {
namespace {

using u128 = unsigned __int128;

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  const u128 p = u128{a} * b;
  return p > std::numeric_limits<uint64_t>::max() ? std::numeric_limits<uint64_t>::max()
                                                  : static_cast<uint64_t>(p);
}

// Largest n with A_k(n) <= limit. A_k(n) >= floor(w_k * cs * n / 2^32), so
// n = (limit + 1) * 2^32 / (w_k * cs) + 1 already exceeds it: search below that,
// and below the n where chunk_size * n would overflow.
uint64_t LastChunk(const MixtureSchedule& s, size_t k, uint64_t limit) {
  const u128 bound = ((u128{limit} + 1) << 32) / (u128{s.weights()[k]} * s.chunk_size()) + 1;
  const uint64_t overflow_cap = std::numeric_limits<uint64_t>::max() / s.chunk_size() - 1;
  const uint64_t max_n = bound > overflow_cap ? overflow_cap : static_cast<uint64_t>(bound);
  return s.LastChunkWithin(k, limit, max_n);
}

}  // namespace

WorkSource::WorkSource(std::vector<std::shared_ptr<const Dataset>> datasets,
                       MixtureSchedule schedule, const proto::WorkSourceSpec& spec,
                       std::vector<uint64_t> block_sizes)
    : datasets_(std::move(datasets)),
      schedule_(std::move(schedule)),
      block_sizes_(std::move(block_sizes)) {
  for (size_t k = 0; k < datasets_.size(); ++k) {
    const auto& d = spec.datasets(static_cast<int>(k));
    max_repeats_.push_back(d.has_max_repeats() ? std::optional<uint32_t>(d.max_repeats())
                                               : std::nullopt);
    orders_.push_back(std::make_unique<DatasetOrder>(
        datasets_[k].get(), static_cast<uint32_t>(k), Combine(spec.seed(), k),
        spec.shuffle_shards(), spec.shuffle_within_shard(), block_sizes_[k]));
  }
}

absl::StatusOr<std::unique_ptr<WorkSource>> WorkSource::Create(
    const proto::WorkSourceSpec& spec, std::vector<std::shared_ptr<const Dataset>> datasets) {
  // The spec's own validation and defaults are ResolvePipeline's; these two guard the
  // REQUIRES (a division by a zero chunk size, an unknown policy) without repeating it.
  RETURN_IF_ERROR(CheckResolved(spec.exhausted_policy()));
  if (spec.chunk_size() == 0 ||
      (spec.exhausted_policy() == proto::WorkSourceSpec::STOP_AFTER_PASSES &&
       spec.stop_after_passes() == 0)) {
    return absl::InvalidArgumentError(
        "work_source.chunk_size and stop_after_passes must be >= 1 in a resolved spec "
        "(ResolvePipeline sets the defaults)");
  }
  if (datasets.empty() || datasets.size() != static_cast<size_t>(spec.datasets_size())) {
    return absl::InvalidArgumentError(absl::StrCat("work_source.datasets has ",
                                                   spec.datasets_size(), " entries but ",
                                                   datasets.size(), " datasets were opened"));
  }
  std::vector<double> weights(spec.weights().begin(), spec.weights().end());
  if (!weights.empty() && weights.size() != datasets.size()) {
    return absl::InvalidArgumentError(absl::StrCat("work_source.weights has ", weights.size(),
                                                   " entries, datasets has ", datasets.size()));
  }
  // Unset weight_by is SAMPLES (the proto's default; ResolvePipeline fills it).
  if (spec.weight_by() != proto::WorkSourceSpec::WEIGHT_BY_UNSPECIFIED) {
    RETURN_IF_ERROR(CheckResolved(spec.weight_by()));
  }
  std::vector<double> tokens_per_sample;
  if (spec.weight_by() == proto::WorkSourceSpec::TOKENS) {
    for (const auto& d : datasets) tokens_per_sample.push_back(EstimateTokensPerSample(*d));
    ASSIGN_OR_RETURN(weights, SampleWeightsForTokenShares(weights, datasets, tokens_per_sample));
  } else if (weights.empty()) {
    for (const auto& d : datasets) weights.push_back(static_cast<double>(d->NumSamples()));
  }
  auto normalized = NormalizeWeights(weights);
  if (!normalized.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("work_source.", normalized.status().message()));
  }
  const uint64_t chunk_size = spec.chunk_size();
  const proto::WorkSourceSpec::ExhaustedPolicy policy = spec.exhausted_policy();
  ASSIGN_OR_RETURN(std::vector<uint64_t> block_sizes,
                   ResolveBlockSizes(spec.shuffle_block_size(), datasets));
  MixtureSchedule schedule(*std::move(normalized), chunk_size);
  std::unique_ptr<WorkSource> ws(
      new WorkSource(std::move(datasets), schedule, spec, std::move(block_sizes)));
  ws->policy_ = policy;
  ws->tokens_per_sample_ = std::move(tokens_per_sample);
  if (!ws->tokens_per_sample_.empty()) {
    // What the user asked for, shown beside the sample weights it became.
    std::vector<double> asked(spec.weights().begin(), spec.weights().end());
    if (asked.empty()) {
      for (size_t k = 0; k < ws->datasets_.size(); ++k) {
        asked.push_back(static_cast<double>(ws->datasets_[k]->NumSamples()) *
                        ws->tokens_per_sample_[k]);
      }
    }
    double total = 0;
    for (double w : asked) total += w;
    for (double w : asked) ws->token_shares_.push_back(w / total);
  }
  const uint64_t passes = spec.stop_after_passes();
  if (policy == proto::WorkSourceSpec::STOP_AFTER_PASSES) {
    uint64_t n_end = 0;
    for (size_t k = 0; k < ws->datasets_.size(); ++k) {
      const uint64_t limit = SaturatingMul(passes, ws->datasets_[k]->NumSamples());
      n_end = std::max(n_end, LastChunk(ws->schedule_, k, limit));
    }
    ws->num_chunks_ = n_end;
  } else if (policy == proto::WorkSourceSpec::STOP) {
    uint64_t n_end = std::numeric_limits<uint64_t>::max();
    for (size_t k = 0; k < ws->datasets_.size(); ++k) {
      n_end = std::min(n_end, LastChunk(ws->schedule_, k, ws->datasets_[k]->NumSamples()));
    }
    ws->num_chunks_ = n_end;
  } else {  // REPEAT
    for (size_t k = 0; k < ws->datasets_.size(); ++k) {
      if (!ws->max_repeats_[k]) continue;
      const uint64_t passes_k = uint64_t{1} + *ws->max_repeats_[k];
      const uint64_t limit = SaturatingMul(passes_k, ws->datasets_[k]->NumSamples());
      const uint64_t n_k = LastChunk(ws->schedule_, k, limit);
      ws->num_chunks_ = ws->num_chunks_ ? std::min(*ws->num_chunks_, n_k) : n_k;
    }
  }
  if (ws->num_chunks_ == uint64_t{0}) return ws->NoChunkError(spec, passes);
  return ws;
}

absl::Status WorkSource::NoChunkError(const proto::WorkSourceSpec& spec, uint64_t passes) const {
  // Name every dataset that cannot fill its share of the first chunk under the policy:
  // for "stop_after_passes" that is all of them, for "stop" and bounded "repeat" those
  // whose own limit is 0 chunks.
  std::vector<std::string> short_datasets;
  std::vector<uint64_t> first_quotas;
  schedule_.Quotas(0, &first_quotas);
  for (size_t k = 0; k < datasets_.size(); ++k) {
    uint64_t allowed_passes = 1;
    if (policy_ == proto::WorkSourceSpec::STOP_AFTER_PASSES) allowed_passes = passes;
    if (policy_ == proto::WorkSourceSpec::REPEAT) {
      if (!max_repeats_[k]) continue;
      allowed_passes = uint64_t{1} + *max_repeats_[k];
    }
    const uint64_t limit = SaturatingMul(allowed_passes, datasets_[k]->NumSamples());
    if (LastChunk(schedule_, k, limit) != 0) continue;
    short_datasets.push_back(absl::StrCat(
        "dataset '", datasets_[k]->name(), "' has ", datasets_[k]->NumSamples(), " samples",
        allowed_passes > 1 ? absl::StrCat(" (", allowed_passes, " passes allowed)") : "",
        ", fewer than its share of one chunk (",
        first_quotas[k], " of chunk_size=", schedule_.chunk_size(), ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "work_source yields no chunk, so no batch (exhausted_policy '", OptionName(policy_),
      "'): ",
      absl::StrJoin(short_datasets, "; "),
      ". Lower work_source.chunk_size or add data", policy_ == proto::WorkSourceSpec::REPEAT
          ? " (or raise max_repeats)" : ""));
}

void WorkSource::Chunk(uint64_t g, std::vector<SampleId>* out) const {
  const size_t num = datasets_.size();
  std::vector<uint64_t> base, quota;
  schedule_.Cumulative(g, &base);
  schedule_.Quotas(g, &quota);
  out->clear();
  out->reserve(schedule_.chunk_size());
  std::vector<int64_t> score(num, 0);
  std::vector<uint64_t> used(num, 0);
  const int64_t total = static_cast<int64_t>(schedule_.chunk_size());
  for (int64_t step = 0; step < total; ++step) {
    size_t best = num;
    for (size_t k = 0; k < num; ++k) {
      if (used[k] == quota[k]) continue;
      score[k] += static_cast<int64_t>(quota[k]);
      if (best == num || score[k] > score[best]) best = k;
    }
    score[best] -= total;
    out->push_back(orders_[best]->Draw(base[best] + used[best]));
    ++used[best];
  }
}

std::string WorkSource::Describe() const {
  std::vector<std::string> parts;
  for (size_t k = 0; k < datasets_.size(); ++k) {
    const std::string tokens =
        tokens_per_sample_.empty()
            ? ""
            : absl::StrCat("token share ", token_shares_[k], ", tokens/sample ",
                           tokens_per_sample_[k], ", sample ");
    parts.push_back(absl::StrCat(datasets_[k]->name(), "(", datasets_[k]->format(), ", ",
                                 datasets_[k]->NumShards(), " shards, ",
                                 datasets_[k]->NumSamples(), " samples, ", tokens, "weight ",
                                 static_cast<double>(schedule_.weights()[k]) / kWeightOne,
                                 block_sizes_[k] ? absl::StrCat(", block ", block_sizes_[k]) : "",
                                 max_repeats_[k] ? absl::StrCat(", max_repeats ", *max_repeats_[k])
                                     : "",
                                 ")"));
  }
  return absl::StrCat("StaticMixture[", absl::StrJoin(parts, ", "), "] chunk_size=",
                      schedule_.chunk_size(), " policy=", OptionName(policy_),
                      tokens_per_sample_.empty() ? "" : " weight_by=tokens", " chunks=",
                      num_chunks_ ? absl::StrCat(*num_chunks_) : std::string("inf"));
}

std::vector<double> WorkSource::TargetWeights(uint64_t /*g*/) const {
  if (!token_shares_.empty()) return token_shares_;
  std::vector<double> shares;
  for (uint64_t w : schedule_.weights()) {
    shares.push_back(static_cast<double>(w) / static_cast<double>(kWeightOne));
  }
  return shares;
}

}  // namespace zephon::pipeline
