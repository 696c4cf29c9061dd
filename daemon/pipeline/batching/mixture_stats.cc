#include "daemon/pipeline/batching/mixture_stats.h"

#include <utility>

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

MixtureStats::MixtureStats(std::vector<double> target_shares, bool weight_by_tokens)
    : target_shares_(std::move(target_shares)),
      weight_by_tokens_(weight_by_tokens),
      counters_(target_shares_.size()) {}

void MixtureStats::AddEmitted(uint32_t dataset, uint64_t tokens) {
  counters_[dataset].samples.fetch_add(1, std::memory_order_relaxed);
  counters_[dataset].tokens.fetch_add(tokens, std::memory_order_relaxed);
}

void MixtureStats::AddGroup(const MixtureGroupCounts& group, bool over_tolerance) {
  for (size_t k = 0; k < counters_.size() && k < group.dropped_samples.size(); ++k) {
    counters_[k].dropped_samples.fetch_add(group.dropped_samples[k], std::memory_order_relaxed);
    counters_[k].dropped_tokens.fetch_add(group.dropped_tokens[k], std::memory_order_relaxed);
  }
  if (over_tolerance) groups_over_tolerance_.fetch_add(1, std::memory_order_relaxed);
}

MixtureFigures MixtureStats::Snapshot(uint32_t lane) const {
  MixtureFigures f;
  f.lane = lane;
  f.weight_by_tokens = weight_by_tokens_;
  f.groups_over_tolerance = groups_over_tolerance_.load(std::memory_order_relaxed);
  for (size_t k = 0; k < counters_.size(); ++k) {
    DatasetMixFigures d;
    d.target_share = target_shares_[k];
    d.samples = counters_[k].samples.load(std::memory_order_relaxed);
    d.tokens = counters_[k].tokens.load(std::memory_order_relaxed);
    d.dropped_samples = counters_[k].dropped_samples.load(std::memory_order_relaxed);
    d.dropped_tokens = counters_[k].dropped_tokens.load(std::memory_order_relaxed);
    f.datasets.push_back(d);
  }
  return f;
}

}  // namespace zephon::pipeline
