#include "daemon/checkpoint/mid_window.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

namespace zephon::checkpoint {

std::optional<std::string> MidWindowWarning(const proto::CheckpointState& state) {
  if (state.lanes().empty()) return std::nullopt;
  uint64_t lo = state.lanes(0).next_batch_index();
  uint64_t hi = lo;
  for (const proto::LaneProgress& lane : state.lanes()) {
    lo = std::min(lo, lane.next_batch_index());
    hi = std::max(hi, lane.next_batch_index());
  }
  if (lo == hi) return std::nullopt;
  const uint32_t c = state.canonical_replicas();
  return absl::StrCat(
      "checkpoint round ", state.round(), " of run ", state.run_id(),
      " was taken mid-window: at global batch ", state.total_batches(),
      " (batches taken across DP groups), which is not a whole number of lane rounds of "
      "C=", c, " (canonical_replicas); the lanes stand at ", lo, "..", hi,
      " batches. It restores exactly, but resumed on another dp_degree the steps after it "
      "hold other batches than they would have. Checkpoint at steps where the run has "
      "taken a multiple of ", c, " batches (e.g. global batches per step a multiple of ", c,
      "). Warned once per run.");
}

}  // namespace zephon::checkpoint
