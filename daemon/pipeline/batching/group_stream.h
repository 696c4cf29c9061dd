// GroupStream: the batch stream of one data-parallel group (one PipelineInstance).
//
// Holds one LaneStream per owned lane (ascending lane order) over one shared
// WorkSource. Output order ("least progress first"):
//   the next batch comes from the owned, not-yet-exhausted lane with the smallest
//   (next_batch_index, lane id); a lane whose NextPlan finds it exhausted is skipped
//   from then on; Next() returns nullopt once all are.
// From a fresh start every lane is at batch 0, so this is strict round robin in
// ascending lane order (owned lane 0, 1, ..., wrap; exhausted lanes skipped). Because
// the order is a function of the lanes' progress only, a stream restored from the
// progress after any batch taken (Create with `restore`) continues exactly where
// the original order was on the same topology, and on another topology starts with
// the least-progressed lane (the guide's rule), so every step of C batches in total
// again takes one batch from every lane.
// The order advances on each Next()/NextPlan(); the daemon calls them as it fills its
// ring, and readers take batches in production order (what they took is tracked
// separately, by daemon/progress_log.h).
// NextPlan() is Next() without reading tokens: the daemon plans in order on its
// producer thread and materializes the plans in parallel (pipeline::Materialize over
// datasets(), daemon/exec/ordered_stage.h), re-ordered by sequence number, so the
// bytes published are those of Next() whatever the thread timing.
// Single-owner (not thread-safe); datasets() is immutable and may be shared.
#ifndef ZEPHON_DAEMON_PIPELINE_BATCHING_GROUP_STREAM_H_
#define ZEPHON_DAEMON_PIPELINE_BATCHING_GROUP_STREAM_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/batching/batch.h"
#include "daemon/pipeline/formats/dataset.h"
#include "daemon/pipeline/batching/lane_stream.h"
#include "daemon/pipeline/ordering/work_source.h"
#include "daemon/pipeline/spec.h"
#include "proto/checkpoint.pb.h"
#include "proto/spec.pb.h"

namespace zephon::pipeline {

class GroupStream {
 public:
  // REQUIRES: `datasets` came from OpenDatasets of `resolved.spec`. `owned_lanes` (from OwnedLanes) must be non-empty, ascending and < C.
  // `restore` (may be null = fresh start; only read during the call) is the per-lane
  // progress of a checkpoint, e.g. CheckpointState.lanes: it must hold exactly one
  // entry for every owned lane, and each owned lane starts at its entry (batch index
  // next_batch_index, position {flush_group_chunk, records_into_group}). Entries of
  // other lanes are ignored. Cost: at most one flush group replayed per owned lane.
  // Errors: INVALID_ARGUMENT from spec / work source / lane validation; naming the lane
  // when `restore` lacks an owned lane, lists a lane twice or names a lane >= C, or
  // holds a position that is not one of that lane (LaneStream::Create).
  // `saved_flush_every_k_chunks` (0 = the spec's own): the flush_every_k_chunks the
  // `restore` positions were taken under, when a resume changed it; they are regrouped
  // to the spec's value first (flush_regroup.h: FAILED_PRECONDITION naming the lane
  // where that is not safe).
  static absl::StatusOr<std::unique_ptr<GroupStream>> Create(
      const ResolvedPipeline& resolved,
      std::vector<std::shared_ptr<const Dataset>> datasets, std::vector<uint32_t> owned_lanes,
      const std::vector<proto::LaneProgress>* restore = nullptr,
      uint64_t saved_flush_every_k_chunks = 0);

  // The next batch in least-progress order, or nullopt when every owned lane is
  // exhausted (and forever after). Errors: those of Materialize.
  absl::StatusOr<std::optional<Batch>> Next();
  // The plan of the batch Next() would return, advancing the same order. CANCELLED
  // once `*cancelled` (set_cancel_flag) is true: skipping many exhausted lanes can take
  // long, and an instance whose last reader left must not keep a core busy.
  absl::StatusOr<std::optional<BatchPlan>> NextPlan();

  // Makes NextPlan()/Next() stop with CANCELLED once `*cancelled` becomes true (checked
  // between lanes). `cancelled` must outlive this stream; null = never cancelled.
  void set_cancel_flag(const std::atomic<bool>* cancelled) { cancelled_ = cancelled; }

  // Each owned lane's progress (ascending lanes) after the batches this stream has
  // returned so far: right after Create, the starting progress (all zeros, or the
  // restored entries). This is production progress; a checkpoint records delivery
  // progress (daemon::ProgressLog, seeded with this value before the first batch).
  const std::vector<proto::LaneProgress>& Progress() const { return progress_; }

  // The work source's datasets, to Materialize plans with; immutable, thread-safe.
  // The shared_ptr keeps them alive after this stream is gone.
  std::shared_ptr<const WorkSource> source() const { return source_; }

  const std::vector<uint32_t>& owned_lanes() const { return owned_lanes_; }
  // Total tokens dropped by pack_flat at flush boundaries over all owned lanes (since
  // Create: a restored stream does not count what the original run dropped).
  uint64_t dropped_tokens() const;
  // Each owned lane's packing figures since Create (ascending lanes): records, token
  // and padding cells of the batches planned, samples and tokens dropped or split.
  // Thread-safe (may be called while the owner plans).
  std::vector<PackFigures> Packing() const;
  // Packing() summed over the owned lanes (lane = 0).
  PackFigures PackingTotal() const;
  // Each owned lane's ensure_mixture figures since Create (ascending lanes); empty when
  // the chain has no ensure_mixture. Thread-safe like Packing().
  std::vector<MixtureFigures> Mixture() const;
  // Multi-line description: work source, lanes, operators, chunk size.
  std::string Explain() const;

 private:
  GroupStream(std::shared_ptr<const WorkSource> source, LaneOptions options,
              std::vector<uint32_t> owned_lanes,
              std::vector<std::unique_ptr<LaneStream>> lanes,
              std::vector<proto::LaneProgress> progress);

  const std::shared_ptr<const WorkSource> source_;
  const LaneOptions options_;
  const std::vector<uint32_t> owned_lanes_;
  std::vector<std::unique_ptr<LaneStream>> lanes_;     // Parallel to owned_lanes_.
  std::vector<bool> exhausted_;                        // Parallel to owned_lanes_.
  std::vector<proto::LaneProgress> progress_;          // Parallel to owned_lanes_.
  // Parallel to owned_lanes_; fixed at construction, counters atomic.
  std::vector<std::shared_ptr<const PackStats>> pack_stats_;
  std::vector<std::shared_ptr<const MixtureStats>> mixture_stats_;  // Empty: none.
  const std::atomic<bool>* cancelled_ = nullptr;       // set by another thread
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_BATCHING_GROUP_STREAM_H_
