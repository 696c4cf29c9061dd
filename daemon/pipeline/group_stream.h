// GroupStream: the batch stream of one data-parallel group (one PipelineInstance).
//
// Holds one LaneStream per owned lane (ascending lane order) over one shared
// WorkSource and emits batches in strict round robin: owned lane 0, 1, ..., wrap.
// A lane that is exhausted is skipped from then on; Next() returns nullopt once all
// are. The round-robin pointer moves on each Next(); the daemon calls Next() as it
// fills its ring, and delivery order equals production order.
// NextPlan() is Next() without reading tokens: the daemon plans in order on its
// producer thread and materializes the plans in parallel (pipeline::Materialize over
// datasets(), daemon/exec/ordered_stage.h), re-ordered by sequence number, so the
// bytes published are those of Next() whatever the thread timing.
// Single-owner (not thread-safe); datasets() is immutable and may be shared.
#ifndef ZEPHON_DAEMON_PIPELINE_GROUP_STREAM_H_
#define ZEPHON_DAEMON_PIPELINE_GROUP_STREAM_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/batch.h"
#include "daemon/pipeline/dataset.h"
#include "daemon/pipeline/lane_stream.h"
#include "daemon/pipeline/work_source.h"
#include "proto/spec.pb.h"

namespace zephon::pipeline {

class GroupStream {
 public:
  // REQUIRES: `resolved_spec` came from ResolveSpec and `datasets` from OpenDatasets of
  // it. `owned_lanes` (from OwnedLanes) must be non-empty, ascending and < C.
  // Errors: INVALID_ARGUMENT from spec / work source / lane validation.
  static absl::StatusOr<std::unique_ptr<GroupStream>> Create(
      const proto::PipelineSpec& resolved_spec,
      std::vector<std::shared_ptr<const Dataset>> datasets, std::vector<uint32_t> owned_lanes);

  // The next batch in round-robin order, or nullopt when every owned lane is exhausted.
  absl::StatusOr<std::optional<Batch>> Next();
  // The plan of the batch Next() would return, advancing the same round robin.
  absl::StatusOr<std::optional<BatchPlan>> NextPlan();

  // The work source's datasets, to Materialize plans with; immutable, thread-safe.
  // The shared_ptr keeps them alive after this stream is gone.
  std::shared_ptr<const WorkSource> source() const { return source_; }

  const std::vector<uint32_t>& owned_lanes() const { return owned_lanes_; }
  // Total tokens dropped by pack_flat at flush boundaries over all owned lanes.
  uint64_t dropped_tokens() const;
  // Multi-line description: work source, lanes, operators, chunk size.
  std::string Explain() const;

 private:
  GroupStream(std::shared_ptr<const WorkSource> source, LaneOptions options,
              std::vector<uint32_t> owned_lanes,
              std::vector<std::unique_ptr<LaneStream>> lanes);

  const std::shared_ptr<const WorkSource> source_;
  const LaneOptions options_;
  const std::vector<uint32_t> owned_lanes_;
  std::vector<std::unique_ptr<LaneStream>> lanes_;
  std::vector<bool> exhausted_;
  size_t next_ = 0;  // Index into lanes_ of the lane whose turn it is.
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_GROUP_STREAM_H_
