#include "daemon/pipeline/ordering/lanes.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/mix.h"
#include "common/run_limits.h"
#include "common/status_macros.h"
#include "daemon/pipeline/ordering/permutation.h"

namespace zephon::pipeline {
namespace {

Permutation BlockPermutation(uint64_t block, uint32_t num_lanes, uint64_t seed) {
  return Permutation(num_lanes, Combine(seed ^ kLaneRoutingSalt, block));
}

}  // namespace

absl::Status CheckCanonicalReplicas(int64_t canonical_replicas) {
  // Checked as int64, before any narrowing: 2^32 + 2 must fail, not become 2. An explicit
  // 0 is an error too (unset means "the initial dp_degree"; 0 lanes means nothing).
  if (canonical_replicas >= 1 && canonical_replicas <= kMaxCanonicalReplicas) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "canonical_replicas=", canonical_replicas,
      " is invalid: expected 1 <= canonical_replicas <= ", kMaxCanonicalReplicas,
      " (leave it unset to use the initial dp_degree)"));
}

absl::Status CheckDpDegreeFitsLanes(int64_t dp_degree, int64_t canonical_replicas) {
  if (dp_degree >= 1 && dp_degree <= canonical_replicas) return absl::OkStatus();
  if (dp_degree < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("dp_degree=", dp_degree, " is invalid: expected dp_degree >= 1"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "dp_degree=", dp_degree, " exceeds canonical_replicas=", canonical_replicas,
      ": a run has at most canonical_replicas data streams (lanes). canonical_replicas is "
      "fixed for the life of a run; choose it for the largest dp_degree you expect"));
}

uint32_t LaneOfChunk(uint64_t g, uint32_t num_lanes, LaneRouting routing, uint64_t seed) {
  const uint64_t slot = g % num_lanes;
  if (routing == proto::PipelineSpec::MODULO) return static_cast<uint32_t>(slot);
  return static_cast<uint32_t>(BlockPermutation(g / num_lanes, num_lanes, seed).Permute(slot));
}

uint64_t GlobalChunkOfLane(uint32_t lane, uint64_t lane_chunk_index, uint32_t num_lanes,
                           LaneRouting routing, uint64_t seed) {
  const uint64_t block_start = lane_chunk_index * num_lanes;
  if (routing == proto::PipelineSpec::MODULO) return block_start + lane;
  const Permutation perm = BlockPermutation(lane_chunk_index, num_lanes, seed);
  for (uint32_t slot = 0; slot < num_lanes; ++slot) {
    if (perm.Permute(slot) == lane) return block_start + slot;
  }
  return block_start;  // Unreachable: perm is a bijection and lane < num_lanes.
}

absl::StatusOr<std::vector<uint32_t>> OwnedLanes(uint32_t num_lanes, uint32_t dp_degree,
                                                 uint32_t dp_group_id, MappingStrategy mapping) {
  RETURN_IF_ERROR(CheckDpDegreeFitsLanes(dp_degree, num_lanes));
  if (dp_group_id >= dp_degree) {
    return absl::InvalidArgumentError(absl::StrCat("dp_group_id ", dp_group_id,
                                                   " must be < dp_degree ", dp_degree));
  }
  std::vector<uint32_t> lanes;
  if (mapping == proto::PipelineSpec::INTERLEAVED) {
    for (uint32_t l = dp_group_id; l < num_lanes; l += dp_degree) lanes.push_back(l);
    return lanes;
  }
  const uint32_t base = num_lanes / dp_degree, extra = num_lanes % dp_degree;
  const uint32_t first = dp_group_id * base + std::min(dp_group_id, extra);
  const uint32_t count = base + (dp_group_id < extra ? 1 : 0);
  for (uint32_t l = first; l < first + count; ++l) lanes.push_back(l);
  return lanes;
}

}  // namespace zephon::pipeline
