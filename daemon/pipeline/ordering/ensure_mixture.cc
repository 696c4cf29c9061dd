#include "daemon/pipeline/ordering/ensure_mixture.h"

#include <cmath>
#include <deque>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/pipeline/ordering/mixture.h"

namespace zephon::pipeline {
namespace {

using i128 = __int128;

// One group's buffer and emission state (the contract's variables).
class Mixer {
 public:
  Mixer(const EnsureMixtureOptions& options, const std::vector<double>& target,
        MixtureGroupCounts* counts, std::vector<SampleId>* out)
      : options_(options), counts_(counts), out_(out), queues_(target.size()),
        emitted_(target.size(), 0) {
    double total = 0;
    for (double t : target) total += t;
    for (double t : target) {
      const double share = t / total;
      shares_.push_back(share);
      plain_.push_back(static_cast<uint64_t>(std::floor(share * kScale)));
      scaled_.push_back(static_cast<uint64_t>(
          std::floor(share * (1.0 - options.obsolete_drain_rate) * kScale)));
    }
  }

  void Push(const SampleId& id, uint64_t length) {
    queues_[id.dataset].push_back({id, length});
    ++buffered_;
  }

  uint64_t buffered() const { return buffered_; }

  // Emits while the dataset needed next is buffered.
  void EmitNeeded() {
    for (size_t k = Pick(false); k < queues_.size() && !queues_[k].empty(); k = Pick(false)) {
      Emit(k);
    }
  }

  // Emits the highest-scoring buffered dataset until at most `size` remain.
  void DrainTo(uint64_t size) {
    while (buffered_ > size) Emit(Pick(true));
  }

  void DropRest() {
    for (size_t k = 0; k < queues_.size(); ++k) {
      for (const auto& [id, length] : queues_[k]) {
        ++counts_->dropped_samples[k];
        counts_->dropped_tokens[k] += length;
      }
      queues_[k].clear();
    }
    buffered_ = 0;
  }

  double MaxDeviation() const {
    if (total_ == 0) return 0;
    double worst = 0;
    for (size_t k = 0; k < shares_.size(); ++k) {
      const double achieved = static_cast<double>(emitted_[k]) / static_cast<double>(total_);
      worst = std::max(worst, std::fabs(achieved - shares_[k]));
    }
    return worst;
  }

 private:
  static constexpr double kScale = static_cast<double>(kWeightOne);

  // W_k of the contract at this moment.
  uint64_t Weight(size_t k, uint64_t num_obsolete) const {
    if (num_obsolete == 0) return plain_[k];
    if (plain_[k] > 0) return scaled_[k];
    if (queues_[k].empty()) return 0;
    return static_cast<uint64_t>(
        std::floor(options_.obsolete_drain_rate * kScale / static_cast<double>(num_obsolete)));
  }

  // The highest score_k among the candidates (buffered_only: datasets holding samples).
  size_t Pick(bool buffered_only) const {
    uint64_t num_obsolete = 0;
    for (size_t k = 0; k < queues_.size(); ++k) {
      if (plain_[k] == 0 && !queues_[k].empty()) ++num_obsolete;
    }
    size_t best = queues_.size();
    i128 best_score = 0;
    for (size_t k = 0; k < queues_.size(); ++k) {
      const uint64_t w = Weight(k, num_obsolete);
      if (w == 0 || (buffered_only && queues_[k].empty())) continue;
      const i128 score = i128{w} * (i128{total_} + 1) - i128{emitted_[k]} * kWeightOne;
      if (best == queues_.size() || score > best_score) {
        best = k;
        best_score = score;
      }
    }
    // Every weight rounded to 0 (shares below 2^-32): the lowest buffered index, so a
    // drain always makes progress.
    for (size_t k = 0; buffered_only && best == queues_.size() && k < queues_.size(); ++k) {
      if (!queues_[k].empty()) best = k;
    }
    return best;
  }

  void Emit(size_t k) {
    const auto [id, length] = queues_[k].front();
    queues_[k].pop_front();
    --buffered_;
    const uint64_t units = options_.weight_by_tokens ? length : 1;
    emitted_[k] += units;
    total_ += units;
    ++counts_->samples[k];
    counts_->tokens[k] += length;
    out_->push_back(id);
  }

  const EnsureMixtureOptions& options_;
  MixtureGroupCounts* const counts_;
  std::vector<SampleId>* const out_;
  std::vector<std::deque<std::pair<SampleId, uint64_t>>> queues_;
  std::vector<uint64_t> emitted_;  // e_k.
  uint64_t total_ = 0;             // E.
  uint64_t buffered_ = 0;
  std::vector<double> shares_;
  std::vector<uint64_t> plain_, scaled_;
};

}  // namespace

std::string EnsureMixtureOptions::Describe() const {
  std::string s = absl::StrCat("ensure_mixture(max_buffer_size=");
  if (max_buffer_size == 0) {
    absl::StrAppend(&s, "None (exact)");
  } else {
    absl::StrAppend(&s, max_buffer_size, ", drain_target_ratio=", drain_target_ratio);
  }
  absl::StrAppend(&s, ", obsolete_drain_rate=", obsolete_drain_rate,
                  ", weight_by=", weight_by_tokens ? "tokens" : "samples");
  if (warn_tolerance) absl::StrAppend(&s, ", warn_tolerance=", *warn_tolerance);
  return s + ")";
}

void ResolveEnsureMixtureDefaults(proto::EnsureMixtureSpec* spec) {
  if (!spec->has_max_buffer_size()) spec->set_max_buffer_size(kDefaultMixtureBufferSize);
  if (!spec->has_drain_target_ratio()) spec->set_drain_target_ratio(kDefaultDrainTargetRatio);
  if (!spec->has_obsolete_drain_rate()) {
    spec->set_obsolete_drain_rate(kDefaultObsoleteDrainRate);
  }
  if (spec->weight_by().empty()) spec->set_weight_by("samples");
}

absl::StatusOr<EnsureMixtureOptions> EnsureMixtureOptionsFromSpec(
    const proto::EnsureMixtureSpec& spec, int index) {
  const std::string op = absl::StrCat("operators[", index, "] ensure_mixture.");
  EnsureMixtureOptions o;
  o.enabled = true;
  o.max_buffer_size = spec.has_max_buffer_size() ? spec.max_buffer_size()
                                                 : kDefaultMixtureBufferSize;
  if (o.max_buffer_size > kMaxMixtureBufferSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, "max_buffer_size must be <= ", kMaxMixtureBufferSize, " (0 = exact mode), got ",
        o.max_buffer_size));
  }
  o.drain_target_ratio =
      spec.has_drain_target_ratio() ? spec.drain_target_ratio() : kDefaultDrainTargetRatio;
  if (!(o.drain_target_ratio >= 0 && o.drain_target_ratio < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, "drain_target_ratio must be in [0, 1), got ", o.drain_target_ratio));
  }
  o.obsolete_drain_rate =
      spec.has_obsolete_drain_rate() ? spec.obsolete_drain_rate() : kDefaultObsoleteDrainRate;
  if (!(o.obsolete_drain_rate > 0 && o.obsolete_drain_rate <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, "obsolete_drain_rate must be in (0, 1], got ", o.obsolete_drain_rate));
  }
  if (spec.weight_by() == "tokens") {
    o.weight_by_tokens = true;
  } else if (!spec.weight_by().empty() && spec.weight_by() != "samples") {
    return absl::InvalidArgumentError(absl::StrCat(
        op, "weight_by '", spec.weight_by(), "' is not one of samples, tokens"));
  }
  if (spec.has_warn_tolerance()) {
    if (!(spec.warn_tolerance() > 0 && spec.warn_tolerance() <= 1)) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, "warn_tolerance must be in (0, 1] (a share), got ", spec.warn_tolerance()));
    }
    o.warn_tolerance = spec.warn_tolerance();
  }
  return o;
}

void EnsureMixture(const EnsureMixtureOptions& options, const std::vector<double>& target,
                   const std::function<uint64_t(const SampleId&)>& length,
                   std::vector<SampleId>* samples, MixtureGroupCounts* counts) {
  const size_t num = target.size();
  for (auto* v : {&counts->samples, &counts->tokens, &counts->dropped_samples,
                  &counts->dropped_tokens}) {
    v->assign(num, 0);
  }
  std::vector<SampleId> out;
  out.reserve(samples->size());
  Mixer mixer(options, target, counts, &out);
  const uint64_t drain_to = static_cast<uint64_t>(
      std::floor(options.drain_target_ratio * static_cast<double>(options.max_buffer_size)));
  for (const SampleId& id : *samples) {
    mixer.Push(id, length(id));
    mixer.EmitNeeded();
    if (options.max_buffer_size > 0 && mixer.buffered() >= options.max_buffer_size) {
      mixer.DrainTo(drain_to);
    }
  }
  mixer.EmitNeeded();
  if (options.max_buffer_size > 0) {
    mixer.DrainTo(0);
  } else {
    mixer.DropRest();
  }
  counts->max_deviation = mixer.MaxDeviation();
  samples->swap(out);
}

}  // namespace zephon::pipeline
