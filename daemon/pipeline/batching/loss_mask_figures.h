// LossMaskFigures: how much of a lane's real (non-padding) tokens the SFT loss mask
// masked, counted over the batches written (explain, status, /metrics zephon_loss_mask_*).
// LossMaskTally is one instance's table of them, per owned lane: the producer thread adds
// each batch it writes, status and explain read snapshots. Thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_BATCHING_LOSS_MASK_FIGURES_H_
#define ZEPHON_DAEMON_PIPELINE_BATCHING_LOSS_MASK_FIGURES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pipeline/batching/batch.h"

namespace zephon::pipeline {

struct LossMaskFigures {
  uint32_t lane = 0;
  uint64_t tokens = 0;  // real cells of the batches counted (padding excluded)
  uint64_t masked = 0;  // those whose mask is 0

  // "tokens=T masked=M (x.xx%)", "-" for the share of zero tokens.
  std::string Describe() const;
};

// The padding cells of a plan (its padding segments) or of a materialized batch (rows
// whose valid_tokens fall short of cols; none without valid_tokens).
uint64_t PaddingCells(const BatchPlan& plan);
uint64_t PaddingCells(const Batch& batch);

class LossMaskTally {
 public:
  // Adds one batch of `lane`: `cells` mask bytes (padding ones are 0), `padding` of
  // them padding. The masked real cells are (cells - padding) - ones.
  void Add(uint32_t lane, const uint8_t* mask, uint64_t cells, uint64_t padding)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every lane added so far, ascending.
  std::vector<LossMaskFigures> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<uint32_t, LossMaskFigures> lanes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_BATCHING_LOSS_MASK_FIGURES_H_
