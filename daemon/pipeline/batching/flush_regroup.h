// Restoring lane positions under a changed flush_every_k_chunks.
//
// A lane position {flush_group_chunk f, records_into_group n} is only meaningful under
// the flush grouping it was taken with: operator state (shuffle buffer, open bins, a
// wrap tail) lives inside a group and is rebuilt by replaying n records of group f. So
// a position carries over to another k' only where no such state exists: at a
// boundary b of both groupings, i.e. the lane has consumed every record of the
// groups before b and none after, and b is a multiple of k (by construction) and of k'.
// RegroupLaneStarts maps each entry of `starts` (taken under `saved_k`):
//   * n == 0 and f % k' == 0: unchanged;
//   * group f fully consumed (its n records are all it has) and (f + saved_k) % k' == 0:
//     {f + saved_k, 0};
//   * the lane has no record left under saved_k (it ended): {the first lane chunk past
//     its data, rounded up to k', 0}, still the end;
//   * else FAILED_PRECONDITION naming the lane, where it stands and the field (mid-group
//     operator state, or a boundary of the old grouping that the new one lacks).
// next_batch_index is kept: the lane's batches continue their numbering.
// Cost: replays at most one flush group per lane (sample lengths only, no token reads),
// only for entries not already on a boundary of k'. `options` is the new lane options
// (flush_every_k_chunks = k'); `starts` must be positions of `source`'s lanes under
// saved_k (LaneStream::Create's errors otherwise). Pure function; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_BATCHING_FLUSH_REGROUP_H_
#define ZEPHON_DAEMON_PIPELINE_BATCHING_FLUSH_REGROUP_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/batching/lane_stream.h"
#include "daemon/pipeline/ordering/work_source.h"
#include "proto/checkpoint.pb.h"

namespace zephon::pipeline {

absl::StatusOr<std::vector<proto::LaneProgress>> RegroupLaneStarts(
    std::shared_ptr<const WorkSource> source, const LaneOptions& options, uint64_t saved_k,
    std::vector<proto::LaneProgress> starts);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_BATCHING_FLUSH_REGROUP_H_
