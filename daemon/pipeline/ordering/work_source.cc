#include "daemon/pipeline/ordering/work_source.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/mix.h"
#include "common/status_macros.h"
#include "daemon/pipeline/ordering/block_shuffle.h"
#include "daemon/pipeline/ordering/phase_schedule.h"
#include "daemon/pipeline/ordering/token_estimate.h"
#include "daemon/pipeline/spec_string_form.h"

namespace zephon::pipeline {

WorkSource::WorkSource(std::vector<std::shared_ptr<const Dataset>> datasets,
                       std::shared_ptr<const Apportionment> schedule,
                       const proto::WorkSourceSpec& spec, std::vector<uint64_t> block_sizes,
                       std::vector<Repetition> repetition)
    : datasets_(std::move(datasets)),
      schedule_(std::move(schedule)),
      block_sizes_(std::move(block_sizes)),
      repetition_(std::move(repetition)) {
  for (size_t k = 0; k < datasets_.size(); ++k) {
    orders_.push_back(std::make_unique<DatasetOrder>(
        datasets_[k].get(), static_cast<uint32_t>(k), Combine(spec.seed(), k),
        spec.shuffle_shards(), spec.shuffle_within_shard(), block_sizes_[k],
        repetition_[k].reshuffle));
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
  if (spec.schedule_size() > 0) return CreateScheduled(spec, std::move(datasets));
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
  ASSIGN_OR_RETURN(std::vector<Repetition> repetition, ResolveRepetition(spec));
  ASSIGN_OR_RETURN(std::vector<uint64_t> block_sizes,
                   ResolveBlockSizes(spec.shuffle_block_size(), datasets));
  auto schedule = std::make_shared<const MixtureSchedule>(*normalized, chunk_size);
  std::unique_ptr<WorkSource> ws(new WorkSource(std::move(datasets), std::move(schedule), spec,
                                                std::move(block_sizes), std::move(repetition)));
  ws->static_weights_ = *std::move(normalized);
  ws->policy_ = spec.exhausted_policy();
  ws->default_passes_ = spec.stop_after_passes();
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
  RETURN_IF_ERROR(ws->SetLength());
  return ws;
}

absl::StatusOr<std::unique_ptr<WorkSource>> WorkSource::CreateScheduled(
    const proto::WorkSourceSpec& spec, std::vector<std::shared_ptr<const Dataset>> datasets) {
  ASSIGN_OR_RETURN(PhaseSchedule phases, PhaseSchedule::Create(spec));
  auto schedule = std::make_shared<const PhaseSchedule>(std::move(phases));
  ASSIGN_OR_RETURN(std::vector<Repetition> repetition, ResolveRepetition(spec));
  ASSIGN_OR_RETURN(std::vector<uint64_t> block_sizes,
                   ResolveBlockSizes(spec.shuffle_block_size(), datasets));
  std::unique_ptr<WorkSource> ws(new WorkSource(std::move(datasets), schedule, spec,
                                                std::move(block_sizes), std::move(repetition)));
  ws->phase_schedule_ = schedule;
  ws->schedule_description_ = schedule->Describe();
  ws->policy_ = spec.exhausted_policy();
  ws->default_passes_ = spec.stop_after_passes();
  RETURN_IF_ERROR(ws->SetLength());
  return ws;
}

absl::Status WorkSource::SetLength() {
  std::vector<uint64_t> num_samples;
  for (const auto& d : datasets_) num_samples.push_back(d->NumSamples());
  num_chunks_ = StreamEnd(repetition_, num_samples, [this](size_t k, uint64_t limit) {
    return schedule_->LastChunk(k, limit);
  });
  if (num_chunks_ == uint64_t{0}) return NoChunkError();
  return absl::OkStatus();
}

absl::Status WorkSource::NoChunkError() const {
  // Name every dataset that cannot fill its share of the first chunk under its policy:
  // those whose own limit is 0 chunks (an unbounded "repeat" dataset never is).
  std::vector<std::string> short_datasets;
  std::vector<uint64_t> first_quotas;
  schedule_->ChunkQuotas(0, &first_quotas);
  bool any_repeat = false;
  for (size_t k = 0; k < datasets_.size(); ++k) {
    const std::optional<uint64_t> allowed_passes = repetition_[k].AllowedPasses();
    if (!allowed_passes) continue;
    any_repeat |= repetition_[k].policy == proto::WorkSourceSpec::REPEAT;
    const uint64_t limit = *repetition_[k].DrawLimit(datasets_[k]->NumSamples());
    if (schedule_->LastChunk(k, limit) != uint64_t{0}) continue;
    short_datasets.push_back(absl::StrCat(
        "dataset '", datasets_[k]->name(), "' has ", datasets_[k]->NumSamples(), " samples",
        *allowed_passes > 1 ? absl::StrCat(" (", *allowed_passes, " passes allowed)") : "",
        ", fewer than its share of one chunk (", first_quotas[k],
        " of chunk_size=", schedule_->chunk_size(), ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "work_source yields no chunk, so no batch (exhausted_policy '", OptionName(policy_),
      "'): ", absl::StrJoin(short_datasets, "; "), ". Lower work_source.chunk_size or add data",
      any_repeat ? " (or raise max_repeats)" : ""));
}

void WorkSource::Chunk(uint64_t g, std::vector<SampleId>* out) const {
  const size_t num = datasets_.size();
  std::vector<uint64_t> base, end;
  schedule_->Cumulative(g, &base);
  schedule_->Cumulative(g + 1, &end);
  std::vector<uint64_t> quota(num);
  uint64_t chunk_total = 0;
  for (size_t k = 0; k < num; ++k) {
    quota[k] = end[k] - base[k];
    chunk_total += quota[k];
  }
  out->clear();
  out->reserve(chunk_total);
  // Each dataset's draws of the chunk at once (AppendDraws: one pass lookup per pass,
  // not per draw), then interleaved.
  std::vector<std::vector<SampleId>> draws(num);
  for (size_t k = 0; k < num; ++k) orders_[k]->AppendDraws(base[k], quota[k], &draws[k]);
  std::vector<int64_t> score(num, 0);
  std::vector<uint64_t> used(num, 0);
  // chunk_size for a static mixture; a schedule's chunk may differ by < K (phase_schedule.h).
  const int64_t total = static_cast<int64_t>(chunk_total);
  for (int64_t step = 0; step < total; ++step) {
    size_t best = num;
    for (size_t k = 0; k < num; ++k) {
      if (used[k] == quota[k]) continue;
      score[k] += static_cast<int64_t>(quota[k]);
      if (best == num || score[k] > score[best]) best = k;
    }
    score[best] -= total;
    out->push_back(draws[best][used[best]]);
    ++used[best];
  }
}

std::optional<uint64_t> WorkSource::ChunkOfDraw(size_t k, uint64_t j) const {
  // The largest n with A_k(n) <= j is the chunk whose draws include j.
  const std::optional<uint64_t> g = schedule_->LastChunk(k, j);
  if (!g.has_value() || (num_chunks_ && *g >= *num_chunks_)) return std::nullopt;
  return g;
}

std::string WorkSource::DescribeProgress(uint64_t g) const {
  std::vector<uint64_t> draws;
  schedule_->Cumulative(g, &draws);
  std::vector<std::string> passes;
  for (size_t k = 0; k < datasets_.size(); ++k) {
    passes.push_back(absl::StrFormat(
        "%s %.3f (%s)", datasets_[k]->name(),
        static_cast<double>(draws[k]) / static_cast<double>(datasets_[k]->NumSamples()),
        DescribeRepetition(repetition_[k])));
  }
  std::string out = absl::StrCat("mixture at chunk ", g, ": passes ", absl::StrJoin(passes, ", "));
  const std::optional<CurriculumPosition> at = CurriculumAt(g);
  if (!at.has_value()) return out;
  std::vector<std::string> named;
  for (size_t k = 0; k < datasets_.size(); ++k) {
    named.push_back(absl::StrFormat("%s %.4g", datasets_[k]->name(), at->weights[k]));
  }
  return absl::StrCat("curriculum: phase ", at->phase, " of ", at->phases, " (from chunk ",
                      at->phase_start_chunk, ", ", at->linear ? "linear" : "step",
                      "), weights ", absl::StrJoin(named, ", "), " at chunk ", g, "\n", out);
}

std::optional<CurriculumPosition> WorkSource::CurriculumAt(uint64_t g) const {
  if (phase_schedule_ == nullptr) return std::nullopt;
  CurriculumPosition at;
  at.chunk = g;
  at.phase = phase_schedule_->PhaseOf(g);
  at.phases = phase_schedule_->phases().size();
  at.phase_start_chunk = phase_schedule_->phases()[at.phase].start_chunk;
  at.linear = phase_schedule_->linear();
  at.weights = phase_schedule_->WeightsAt(g);
  return at;
}

std::string WorkSource::Describe() const {
  std::vector<std::string> parts;
  for (size_t k = 0; k < datasets_.size(); ++k) {
    const std::string tokens =
        tokens_per_sample_.empty()
            ? ""
            : absl::StrCat("token share ", token_shares_[k], ", tokens/sample ",
                           tokens_per_sample_[k], ", sample ");
    const std::string weight =
        static_weights_.empty()
            ? ""
            : absl::StrCat(", ", tokens, "weight ",
                           static_cast<double>(static_weights_[k]) / kWeightOne);
    // The dataset's own policy only when it is not the work source's plain default.
    const Repetition& rep = repetition_[k];
    const bool own_policy = rep.policy != policy_ || !rep.reshuffle ||
                            (rep.policy == proto::WorkSourceSpec::STOP_AFTER_PASSES &&
                             rep.passes != default_passes_);
    parts.push_back(absl::StrCat(
        datasets_[k]->name(), "(", datasets_[k]->format(), ", ", datasets_[k]->NumShards(),
        " shards, ", datasets_[k]->NumSamples(), " samples", weight,
        block_sizes_[k] ? absl::StrCat(", block ", block_sizes_[k]) : "",
        own_policy ? absl::StrCat(", policy ", DescribeRepetition(rep))
        : rep.max_repeats ? absl::StrCat(", max_repeats ", *rep.max_repeats)
                          : "",
        ")"));
  }
  return absl::StrCat(schedule_description_.empty() ? "StaticMixture" : "ScheduledMixture", "[",
                      absl::StrJoin(parts, ", "), "]", schedule_description_,
                      " chunk_size=", schedule_->chunk_size(), " policy=", OptionName(policy_),
                      tokens_per_sample_.empty() ? "" : " weight_by=tokens", " chunks=",
                      num_chunks_ ? absl::StrCat(*num_chunks_) : std::string("inf"));
}

std::vector<double> WorkSource::TargetWeights(uint64_t g) const {
  if (!token_shares_.empty()) return token_shares_;
  // A curriculum's weights in force at chunk g (W_k(g) / 2^32, summing to 1).
  if (phase_schedule_ != nullptr) return phase_schedule_->WeightsAt(g);
  std::vector<double> shares;
  for (uint64_t w : static_weights_) {
    shares.push_back(static_cast<double>(w) / static_cast<double>(kWeightOne));
  }
  return shares;
}

}  // namespace zephon::pipeline
