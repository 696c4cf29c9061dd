// MixtureStats: the mixture a lane's ensure_mixture achieved, per dataset, next to
// its target (explain(), InstanceStatus.mixture, zephon_mixture_* metrics).
//
// Counted when the operator's output enters pack_flat (samples, tokens) and when a
// flush group is reordered (exact mode's dropped surplus; groups whose achieved share
// deviated beyond warn_tolerance), since the LaneStream was created (a restored stream
// starts from zero, like PackStats). Thread-safe: atomic counters, written by the
// lane's owner, read by status and metrics.
#ifndef ZEPHON_DAEMON_PIPELINE_BATCHING_MIXTURE_STATS_H_
#define ZEPHON_DAEMON_PIPELINE_BATCHING_MIXTURE_STATS_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

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

class MixtureStats {
 public:
  MixtureStats(std::vector<double> target_shares, bool weight_by_tokens);

  void AddEmitted(uint32_t dataset, uint64_t tokens);
  void AddGroup(const MixtureGroupCounts& group, bool over_tolerance);
  MixtureFigures Snapshot(uint32_t lane) const;

 private:
  struct Counters {
    std::atomic<uint64_t> samples{0}, tokens{0}, dropped_samples{0}, dropped_tokens{0};
  };
  const std::vector<double> target_shares_;
  const bool weight_by_tokens_;
  std::vector<Counters> counters_;  // Sized once; never resized.
  std::atomic<uint64_t> groups_over_tolerance_{0};
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_BATCHING_MIXTURE_STATS_H_
