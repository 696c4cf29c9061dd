// MixtureStats: the mixture a lane's ensure_mixture achieved, per dataset, next to
// its target (explain(), InstanceStatus.mixture, zephon_mixture_* metrics).
//
// Counted when the operator's output enters pack_flat (samples, tokens) and when a
// flush group is reordered (exact mode's dropped surplus; groups whose achieved share
// deviated beyond warn_tolerance), since the LaneStream was created (a restored stream
// starts from zero, like PackStats). Thread-safe: atomic counters (and the target under
// a mutex, written once per group), written by the lane's owner, read by status and
// metrics.
#ifndef ZEPHON_DAEMON_PIPELINE_BATCHING_MIXTURE_STATS_H_
#define ZEPHON_DAEMON_PIPELINE_BATCHING_MIXTURE_STATS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pipeline/ordering/ensure_mixture.h"

namespace zephon::pipeline {

struct DatasetMixFigures {
  double target_share = 0;  // In the operator's weight_by units.
  uint64_t samples = 0;
  uint64_t tokens = 0;
  uint64_t dropped_samples = 0;
  uint64_t dropped_tokens = 0;
};

struct MixtureFigures {
  uint32_t lane = 0;
  bool weight_by_tokens = false;
  std::vector<DatasetMixFigures> datasets;
  uint64_t groups_over_tolerance = 0;
};

// The figures of `lanes` added up (lane = 0). REQUIRES: one dataset count.
MixtureFigures SumMixtureFigures(const std::vector<MixtureFigures>& lanes);
// A dataset's achieved share of the emitted units (samples or tokens); 0 when none.
double AchievedShare(const MixtureFigures& f, size_t dataset);

// Largest |achieved - target share| over the datasets (0 when nothing was emitted).
double MaxDeviation(const MixtureFigures& f);

// Explain's lines, "    mixture lane <l> (emitted so far, by samples|tokens):
// <dataset> <achieved>/<target> samples=.. tokens=.. [dropped_samples=..], ...": one
// per lane up to 8 lanes; beyond, the lanes' total and the lane farthest from target.
// `names[k]` names dataset k.
void AppendMixtureLines(const std::vector<MixtureFigures>& lanes,
                        const std::vector<std::string>& names, std::string* out);

// The target shown is the target of the groups reordered so far, weighted by what each
// group emitted (a curriculum's target moves from group to group; before any group,
// `target_shares`).
class MixtureStats {
 public:
  MixtureStats(std::vector<double> target_shares, bool weight_by_tokens);

  void AddEmitted(uint32_t dataset, uint64_t tokens);
  // `target`: the shares the group was reordered toward.
  void AddGroup(const MixtureGroupCounts& group, bool over_tolerance,
                const std::vector<double>& target) ABSL_LOCKS_EXCLUDED(mu_);
  MixtureFigures Snapshot(uint32_t lane) const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Counters {
    std::atomic<uint64_t> samples{0}, tokens{0}, dropped_samples{0}, dropped_tokens{0};
  };
  const std::vector<double> target_shares_;
  const bool weight_by_tokens_;
  std::vector<Counters> counters_;  // Sized once; never resized.
  std::atomic<uint64_t> groups_over_tolerance_{0};
  mutable absl::Mutex mu_;
  std::vector<double> weighted_target_ ABSL_GUARDED_BY(mu_);  // sum of share x units
  double target_units_ ABSL_GUARDED_BY(mu_) = 0;              // sum of units
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_BATCHING_MIXTURE_STATS_H_
