#include "daemon/pipeline/batching/chain_spec.h"

#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zephon::pipeline {
namespace {

absl::Status Refuse(int index, const std::string& what) {
  return absl::InvalidArgumentError(
      absl::StrCat("operators[", index, "]: ", what, " (", kChainGrammar, ")"));
}

}  // namespace

absl::StatusOr<ShuffleOptions> ShuffleOptionsFromSpec(const proto::ShuffleSpec& spec,
                                                      int index) {
  const std::string op = absl::StrCat("operators[", index, "] shuffle");
  ShuffleOptions o;
  o.buffer_size = spec.buffer_size();
  o.seed = spec.seed();
  if (o.buffer_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat(op, ".buffer_size must be >= 1, got 0"));
  }
  absl::StatusOr<ShuffleAlgorithm> algorithm = ParseShuffleAlgorithm(spec.algorithm());
  if (!algorithm.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("operators[", index, "] ", algorithm.status().message()));
  }
  o.algorithm = *algorithm;
  if (o.algorithm != ShuffleAlgorithm::kBlockWarmup) {
    if (spec.has_warmup_growth()) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ".warmup_growth applies to algorithm 'block_warmup' only, not '",
          ShuffleAlgorithmName(o.algorithm), "': remove it"));
    }
    return o;
  }
  o.warmup_growth = spec.has_warmup_growth() ? spec.warmup_growth() : kDefaultWarmupGrowth;
  if (!(o.warmup_growth > 1.0 && o.warmup_growth <= kMaxWarmupGrowth)) {
    return absl::InvalidArgumentError(absl::StrCat(op, ".warmup_growth must be in (1, ",
                                                   kMaxWarmupGrowth, "], got ",
                                                   o.warmup_growth));
  }
  return o;
}

absl::Status ParsePrePackStages(const proto::PipelineSpec& spec, int* i,
                                ReorderStages* stages) {
  const auto& ops = spec.operators();
  for (; *i < ops.size(); ++*i) {
    const proto::OperatorSpec& op = ops[*i];
    if (op.has_shuffle()) {
      if (stages->sample_shuffle.enabled()) {
        return Refuse(*i, "a second shuffle before pack_flat: one shuffle per position");
      }
      ASSIGN_OR_RETURN(stages->sample_shuffle, ShuffleOptionsFromSpec(op.shuffle(), *i));
    } else if (op.has_ensure_mixture()) {
      if (stages->mixture.enabled) {
        return Refuse(*i, "a second ensure_mixture: one per chain");
      }
      ASSIGN_OR_RETURN(stages->mixture, EnsureMixtureOptionsFromSpec(op.ensure_mixture(), *i));
      stages->mixture_before_shuffle = !stages->sample_shuffle.enabled();
      if (spec.work_source().weight_by() == proto::WorkSourceSpec::TOKENS &&
          !stages->mixture.weight_by_tokens) {
        return absl::InvalidArgumentError(absl::StrCat(
            "operators[", *i, "] ensure_mixture.weight_by 'samples' with a work source "
            "weighing tokens (its weights are token shares): use weight_by=\"tokens\""));
      }
    } else {
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status ParseRowShuffle(const proto::PipelineSpec& spec, int* i, ReorderStages* stages) {
  const auto& ops = spec.operators();
  for (; *i < ops.size(); ++*i) {
    const proto::OperatorSpec& op = ops[*i];
    if (op.has_ensure_mixture()) {
      return Refuse(*i,
                    "ensure_mixture must come before pack_flat: a packed row already mixes "
                    "datasets' tokens, and reordering whole rows cannot change a flush "
                    "group's mixture");
    }
    if (!op.has_shuffle()) return absl::OkStatus();
    if (stages->row_shuffle.enabled()) {
      return Refuse(*i, "a second shuffle between pack_flat and batch: one shuffle per "
                        "position");
    }
    ASSIGN_OR_RETURN(stages->row_shuffle, ShuffleOptionsFromSpec(op.shuffle(), *i));
  }
  return absl::OkStatus();
}

absl::Status AfterBatchError(const proto::PipelineSpec& spec, int i) {
  if (spec.operators(i).has_shuffle()) {
    return Refuse(i, "shuffle after batch would reorder whole batches; put it between "
                     "pack_flat and batch to shuffle packed rows");
  }
  return Refuse(i, "nothing may follow batch");
}

void ResolveReorderDefaults(proto::OperatorSpec* op) {
  if (op->has_shuffle()) {
    proto::ShuffleSpec* shuffle = op->mutable_shuffle();
    if (shuffle->algorithm() == "streaming") shuffle->clear_algorithm();
    if (shuffle->algorithm() == "block_warmup" && !shuffle->has_warmup_growth()) {
      shuffle->set_warmup_growth(kDefaultWarmupGrowth);
    }
  }
  if (op->has_ensure_mixture()) ResolveEnsureMixtureDefaults(op->mutable_ensure_mixture());
}

}  // namespace zephon::pipeline
