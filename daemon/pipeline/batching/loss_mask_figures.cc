#include "daemon/pipeline/batching/loss_mask_figures.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zephon::pipeline {

std::string LossMaskFigures::Describe() const {
  return absl::StrCat("tokens=", tokens, " masked=", masked, " (",
                      tokens == 0 ? std::string("-")
                                  : absl::StrFormat("%.2f%%", 100.0 * static_cast<double>(masked) /
                                                                  static_cast<double>(tokens)),
                      ")");
}

uint64_t PaddingCells(const BatchPlan& plan) {
  uint64_t padding = 0;
  for (const Segment& seg : plan.segments) {
    if (seg.padding) padding += seg.count;
  }
  return padding;
}

uint64_t PaddingCells(const Batch& batch) {
  uint64_t padding = 0;
  for (int32_t valid : batch.valid_tokens) {
    if (valid >= 0 && static_cast<uint64_t>(valid) < batch.cols) padding += batch.cols - valid;
  }
  return padding;
}

void LossMaskTally::Add(uint32_t lane, const uint8_t* mask, uint64_t cells, uint64_t padding) {
  uint64_t ones = 0;
  for (uint64_t i = 0; i < cells; ++i) ones += mask[i] != 0;
  const uint64_t real = cells >= padding ? cells - padding : 0;
  absl::MutexLock lock(&mu_);
  LossMaskFigures& f = lanes_[lane];
  f.lane = lane;
  f.tokens += real;
  f.masked += real >= ones ? real - ones : 0;
}

std::vector<LossMaskFigures> LossMaskTally::Snapshot() const {
  absl::MutexLock lock(&mu_);
  std::vector<LossMaskFigures> out;
  for (const auto& [lane, f] : lanes_) out.push_back(f);
  return out;
}

}  // namespace zephon::pipeline
