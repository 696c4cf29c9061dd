#include "daemon/pipeline/batching/mixture_stats.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zephon::pipeline {

MixtureFigures SumMixtureFigures(const std::vector<MixtureFigures>& lanes) {
  MixtureFigures total;
  for (const MixtureFigures& f : lanes) {
    if (total.datasets.empty()) total.datasets.resize(f.datasets.size());
    total.weight_by_tokens = f.weight_by_tokens;
    total.groups_over_tolerance += f.groups_over_tolerance;
    for (size_t k = 0; k < f.datasets.size() && k < total.datasets.size(); ++k) {
      DatasetMixFigures& t = total.datasets[k];
      t.target_share = f.datasets[k].target_share;
      t.samples += f.datasets[k].samples;
      t.tokens += f.datasets[k].tokens;
      t.dropped_samples += f.datasets[k].dropped_samples;
      t.dropped_tokens += f.datasets[k].dropped_tokens;
    }
  }
  return total;
}

double AchievedShare(const MixtureFigures& f, size_t dataset) {
  uint64_t total = 0;
  for (const DatasetMixFigures& d : f.datasets) total += f.weight_by_tokens ? d.tokens : d.samples;
  if (total == 0) return 0;
  const DatasetMixFigures& d = f.datasets[dataset];
  return static_cast<double>(f.weight_by_tokens ? d.tokens : d.samples) /
         static_cast<double>(total);
}

double MaxDeviation(const MixtureFigures& f) {
  double worst = 0;
  for (size_t k = 0; k < f.datasets.size(); ++k) {
    worst = std::max(worst, std::fabs(AchievedShare(f, k) - f.datasets[k].target_share));
  }
  return worst;
}

namespace {

constexpr size_t kMixtureLinesPerLane = 8;

void AppendMixtureLine(const std::string& what, const MixtureFigures& f,
                       const std::vector<std::string>& names, std::string* out) {
  absl::StrAppend(out, "    mixture ", what, " (emitted so far, by ",
                  f.weight_by_tokens ? "tokens" : "samples", "):");
  for (size_t k = 0; k < f.datasets.size(); ++k) {
    const DatasetMixFigures& d = f.datasets[k];
    absl::StrAppend(out, k == 0 ? " " : ", ", k < names.size() ? names[k] : "?", " ",
                    absl::StrFormat("%.4f/%.4f", AchievedShare(f, k), d.target_share),
                    " samples=", d.samples, " tokens=", d.tokens);
    if (d.dropped_samples > 0) absl::StrAppend(out, " dropped_samples=", d.dropped_samples);
  }
  if (f.groups_over_tolerance > 0) {
    absl::StrAppend(out, "; groups over warn_tolerance=", f.groups_over_tolerance);
  }
  absl::StrAppend(out, "\n");
}

}  // namespace

void AppendMixtureLines(const std::vector<MixtureFigures>& lanes,
                        const std::vector<std::string>& names, std::string* out) {
  if (lanes.size() <= kMixtureLinesPerLane) {
    for (const MixtureFigures& f : lanes) {
      AppendMixtureLine(absl::StrCat("lane ", f.lane), f, names, out);
    }
    return;
  }
  const MixtureFigures* worst = &lanes[0];
  for (const MixtureFigures& f : lanes) {
    if (MaxDeviation(f) > MaxDeviation(*worst)) worst = &f;
  }
  AppendMixtureLine(absl::StrCat(lanes.size(), " lanes"), SumMixtureFigures(lanes), names, out);
  AppendMixtureLine(absl::StrCat("farthest lane ", worst->lane), *worst, names, out);
}

MixtureStats::MixtureStats(std::vector<double> target_shares, bool weight_by_tokens)
    : target_shares_(std::move(target_shares)),
      weight_by_tokens_(weight_by_tokens),
      counters_(target_shares_.size()),
      weighted_target_(target_shares_.size(), 0.0) {}

void MixtureStats::AddEmitted(uint32_t dataset, uint64_t tokens) {
  counters_[dataset].samples.fetch_add(1, std::memory_order_relaxed);
  counters_[dataset].tokens.fetch_add(tokens, std::memory_order_relaxed);
}

void MixtureStats::AddGroup(const MixtureGroupCounts& group, bool over_tolerance,
                            const std::vector<double>& target) {
  for (size_t k = 0; k < counters_.size() && k < group.dropped_samples.size(); ++k) {
    counters_[k].dropped_samples.fetch_add(group.dropped_samples[k], std::memory_order_relaxed);
    counters_[k].dropped_tokens.fetch_add(group.dropped_tokens[k], std::memory_order_relaxed);
  }
  if (over_tolerance) groups_over_tolerance_.fetch_add(1, std::memory_order_relaxed);
  const std::vector<uint64_t>& units = weight_by_tokens_ ? group.tokens : group.samples;
  double group_units = 0;
  for (uint64_t u : units) group_units += static_cast<double>(u);
  if (group_units <= 0) return;
  absl::MutexLock lock(&mu_);
  for (size_t k = 0; k < weighted_target_.size() && k < target.size(); ++k) {
    weighted_target_[k] += target[k] * group_units;
  }
  target_units_ += group_units;
}

MixtureFigures MixtureStats::Snapshot(uint32_t lane) const {
  MixtureFigures f;
  f.lane = lane;
  f.weight_by_tokens = weight_by_tokens_;
  f.groups_over_tolerance = groups_over_tolerance_.load(std::memory_order_relaxed);
  std::vector<double> target = target_shares_;
  {
    absl::MutexLock lock(&mu_);
    if (target_units_ > 0) {
      for (size_t k = 0; k < target.size(); ++k) target[k] = weighted_target_[k] / target_units_;
    }
  }
  for (size_t k = 0; k < counters_.size(); ++k) {
    DatasetMixFigures d;
    d.target_share = target[k];
    d.samples = counters_[k].samples.load(std::memory_order_relaxed);
    d.tokens = counters_[k].tokens.load(std::memory_order_relaxed);
    d.dropped_samples = counters_[k].dropped_samples.load(std::memory_order_relaxed);
    d.dropped_tokens = counters_[k].dropped_tokens.load(std::memory_order_relaxed);
    f.datasets.push_back(d);
  }
  return f;
}

}  // namespace zephon::pipeline
