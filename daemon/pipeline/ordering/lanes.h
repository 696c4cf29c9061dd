// Lanes: routing of global chunks to lanes, and of lanes to data-parallel groups.
//
// Routing (C = canonical_replicas lanes, `seed` = work_source.seed):
//   MODULO:  lane(g) = g mod C.
//   PERMUTE: block = g / C, slot = g mod C,
//             lane(g) = Permutation(C, Combine(seed ^ kLaneRoutingSalt, block)).Permute(slot)
//   Either way every block of C consecutive global chunks gives each lane exactly one,
//   so lane chunk index c of lane l is the chunk of block c routed to l.
// Mapping (D = dp_degree groups, d = dp_group_id):
//   CONTIGUOUS:  group d owns a consecutive block of lanes; the first C mod D groups
//                 own floor(C/D) + 1 lanes, the rest floor(C/D) (C=8, D=3: {0,1,2},
//                 {3,4,5}, {6,7}).
//   INTERLEAVED: group d owns lanes l with l mod D == d.
//   Owned lanes are returned ascending: that is the group's round-robin order.
// Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_ORDERING_LANES_H_
#define ZEPHON_DAEMON_PIPELINE_ORDERING_LANES_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/spec.pb.h"

namespace zephon::pipeline {

// The spec's enums (proto/spec.proto). The functions below REQUIRE resolved values, never
// *_UNSPECIFIED (ResolvePipeline fills the defaults).
using LaneRouting = proto::PipelineSpec::LaneRouting;
using MappingStrategy = proto::PipelineSpec::MappingStrategy;

// Salt that keeps the routing permutations independent of the dataset shuffles.
inline constexpr uint64_t kLaneRoutingSalt = 0x5A17E5ULL;

// REQUIRES: num_lanes >= 1.
uint32_t LaneOfChunk(uint64_t g, uint32_t num_lanes, LaneRouting routing, uint64_t seed);
// The global chunk that is lane `lane`'s chunk number `lane_chunk_index`.
// REQUIRES: lane < num_lanes. Inverse of LaneOfChunk (O(C) for PERMUTE).
uint64_t GlobalChunkOfLane(uint32_t lane, uint64_t lane_chunk_index, uint32_t num_lanes,
                           LaneRouting routing, uint64_t seed);

// The one check of a lane count (common/run_limits.h), on the int64 before it is
// narrowed: OK when 1 <= canonical_replicas <= kMaxCanonicalReplicas; INVALID_ARGUMENT
// naming the value, the bounds and the fix otherwise.
absl::Status CheckCanonicalReplicas(int64_t canonical_replicas);
// The one check that D groups can share C lanes: OK when 1 <= dp_degree <= C;
// INVALID_ARGUMENT naming both values and the fix otherwise.
absl::Status CheckDpDegreeFitsLanes(int64_t dp_degree, int64_t canonical_replicas);

// Lanes owned by group d of D. INVALID_ARGUMENT (CheckDpDegreeFitsLanes) unless
// 1 <= D <= C, and unless d < D.
absl::StatusOr<std::vector<uint32_t>> OwnedLanes(uint32_t num_lanes, uint32_t dp_degree,
                                                 uint32_t dp_group_id, MappingStrategy mapping);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_ORDERING_LANES_H_
