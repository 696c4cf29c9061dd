// StepLocator: which samples the engine puts into a given lane batch or global step,
// computed from the spec and the datasets' sample lengths alone: no run, no daemon, no
// token read. The engine is a pure function of both (lane_stream.h, group_stream.h).
//
// Global step N of B batches (B = k * C, C = canonical_replicas = the lane count) holds
// lane batches [N*k, (N+1)*k) of every lane: a DP group serves its owned lanes round
// robin in ascending lane order (group_stream.h), so every C batches in total take one
// batch from each lane, whatever dp_degree. DP group d of D owns L_d =
// OwnedLanes(C, D, d); its t-th batch (from 0) is lane L_d[t mod |L_d|]'s batch
// t / |L_d|, and its batches of step N are t in [N*k*|L_d|, (N+1)*k*|L_d|). A resume
// restores every lane at the same batch index (a checkpoint is taken between steps), so
// this holds across resumes on any dp_degree. It holds while every lane has batches:
// once a lane has ended the round robin skips it, and Step() says which lane ended.
//
// Lane batch b starts at the lane's record b*M (M = microbatch_size): batches are
// consecutive records, across flush groups. The locator counts each flush group's
// records (LaneStream::GroupRecords: sample lengths only) up to that record, keeps the
// running totals per lane for later queries, and replays one flush group from there
// (LaneStream::Create at {group, record - records before it}); a record pipeline without
// ensure_mixture jumps there in O(1) (every group is k * chunk_size records). Cost: the first query
// at lane batch b counts the lane's flush groups up to b, on `threads` threads (without
// ensure_mixture, a wrap or record pipeline's group is counted from its sample lengths
// alone; other packers replay the packing); a query at or below a counted position
// costs O(log groups) plus one group's replay. A checkpoint's lane positions are exact
// anchors (Anchor()): counting then starts at the checkpoint's flush groups.
//
// Thread-safety: not thread-safe (single owner); it starts and joins its own threads.
#ifndef ZEPHON_DAEMON_PIPELINE_PROVENANCE_STEP_LOCATOR_H_
#define ZEPHON_DAEMON_PIPELINE_PROVENANCE_STEP_LOCATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/batching/batch.h"
#include "daemon/pipeline/batching/lane_stream.h"
#include "daemon/pipeline/formats/dataset.h"
#include "daemon/pipeline/ordering/work_source.h"
#include "daemon/pipeline/spec.h"
#include "proto/checkpoint.pb.h"

namespace zephon::pipeline {

// The row of each of `plan`'s segments: segments fill rows of plan.cols cells in order;
// a record batch (cols 0) has one segment per row.
std::vector<uint32_t> SegmentRows(const BatchPlan& plan);

class StepLocator {
 public:
  // REQUIRES: `datasets` came from OpenDatasets of `resolved.spec`. `threads` >= 1
  // count flush groups at once. Errors: WorkSource::Create's.
  static absl::StatusOr<std::unique_ptr<StepLocator>> Create(
      ResolvedPipeline resolved, std::vector<std::shared_ptr<const Dataset>> datasets,
      int threads = 1);

  uint32_t num_lanes() const { return resolved_.lanes.num_lanes; }
  const ResolvedPipeline& resolved() const { return resolved_; }
  const std::shared_ptr<const WorkSource>& source() const { return source_; }

  // Seeds the counts with the lane positions of a checkpoint of this spec (each lane's
  // next_batch_index and position): queries at or after them count from there instead
  // of from each lane's start. Errors: INVALID_ARGUMENT for a position that cannot be
  // one of this spec (a lane >= C, a chunk off a flush-group start, more records into
  // the group than the batches before it hold).
  absl::Status Anchor(const std::vector<proto::LaneProgress>& lanes);
  // One anchor: lane `lane`'s batch `batch` started at `at` (an audit record's lane,
  // lane batch and start position). With an anchor at every group a run started, any
  // step that run reached is found without counting. Errors: as Anchor's.
  absl::Status AddAnchor(uint32_t lane, uint64_t batch, const LanePosition& at);

  // Exact lane positions known (Anchor, AddAnchor; one per lane and flush group).
  uint64_t anchors() const;

  // For every flush group counted so far (any lane) in which a batch starts: the lane,
  // the first batch starting in it and where (what AddAnchor takes; what
  // audit::StepAnchorWriter keeps so that a later query need not count again).
  void ForEachCountedGroupStart(
      const std::function<void(uint32_t lane, uint64_t batch, const LanePosition& at)>& visit)
      const;

  // Lane `lane`'s batch `b` as the daemon plans it (its segments: sample ids and token
  // ranges, row by row), or nullopt past the lane's end.
  // Errors: INVALID_ARGUMENT for lane >= num_lanes().
  absl::StatusOr<std::optional<BatchPlan>> LaneBatch(uint32_t lane, uint64_t b);

  // One delivery of a sample: in its dataset's pass `pass`, the sample is drawn into
  // global chunk `chunk`, routed to `lane`, and its tokens land in lane batch
  // `lane_batch` as `pieces` (row, and the segment: token range) — several when a
  // packer split it, in more than one batch then (one Occurrence per batch).
  struct Occurrence {
    uint64_t pass = 0;
    uint64_t chunk = 0;
    uint32_t lane = 0;
    uint64_t lane_batch = 0;
    std::vector<std::pair<uint32_t, Segment>> pieces;
  };
  // Where sample `id` is delivered in its dataset's passes [0, passes), stopping at the
  // stream's end: per pass its draw is found by inverting the dataset order (shard
  // order, within-shard and block shuffles), its chunk by the mixture's apportionment,
  // its lane by the routing; then its flush group is replayed. A draw that
  // ensure_mixture or an oversized-sample drop left out has no Occurrence. Two passes'
  // draws in one flush group (one across a pass boundary) are both reported with the
  // first of the two passes; a batch spanning two groups is reported once per group
  // that holds the sample in it.
  // Errors: INVALID_ARGUMENT naming the id when it is not a sample of the datasets.
  absl::StatusOr<std::vector<Occurrence>> Occurrences(const SampleId& id, uint64_t passes);

  struct StepBatch {
    uint32_t dp_group = 0;
    uint32_t batch_in_step = 0;  // the DP group's micro-batch of the step, from 0
    BatchPlan plan;              // plan.lane, plan.lane_batch_index: where it came from
  };
  // Every batch of global step `step` of `global_batches` batches (0: C), by DP group
  // (`dp_degree` of them) and then in the order the group's ranks receive them.
  // Errors: INVALID_ARGUMENT when global_batches is not a multiple of C or dp_degree
  // is not in [1, C]; OUT_OF_RANGE naming the lane and its last batch when a lane has
  // ended by that step.
  absl::StatusOr<std::vector<StepBatch>> Step(uint64_t step, uint64_t global_batches,
                                              uint32_t dp_degree);

  // Where lane `lane`'s batch `lane_batch` is delivered: Step()'s mapping inverted.
  struct StepPlace {
    uint64_t step = 0;
    uint32_t dp_group = 0;
    uint32_t batch_in_step = 0;
  };
  // Errors: Step()'s for global_batches and dp_degree; INVALID_ARGUMENT for a lane >= C.
  absl::StatusOr<StepPlace> PlaceOf(uint32_t lane, uint64_t lane_batch, uint64_t global_batches,
                                    uint32_t dp_degree) const;
  // Batches each lane gives a step of `global_batches` (0: C) batches. INVALID_ARGUMENT
  // unless it is a multiple of C.
  absl::StatusOr<uint64_t> BatchesPerLane(uint64_t global_batches) const;

 private:
  // before[i]: records in the lane's flush groups before group first_group + i (group
  // = lane chunk / flush_every_k_chunks); ended: the group after the last counted one
  // has no chunks (before.back() is the lane's record count).
  struct LaneTotals {
    uint64_t first_group = 0;
    std::vector<uint64_t> before{0};
    bool ended = false;
  };

  StepLocator(ResolvedPipeline resolved, std::shared_ptr<const WorkSource> source, int threads);
  // For a record pipeline (no packer, no ensure_mixture, a static mixture), whose group
  // g starts at record g * k * chunk_size: makes the totals of `lane` start at `group`
  // unless they already cover it. False (nothing changed) for other pipelines, or when
  // the lane ends before `group`.
  bool FullGroupsBefore(uint32_t lane, uint64_t group);
  // Restarts the counts of `lane` at the best anchor for the target (`record`, or else
  // `group`) when they do not reach it yet or lie past it; to the lane's start when the
  // target is below the counts and every anchor.
  void StartAtAnchor(uint32_t lane, std::optional<uint64_t> record,
                     std::optional<uint64_t> group);
  // Counts flush groups of `lane` until they hold record `record` or the lane ends.
  absl::Status CountUpTo(uint32_t lane, uint64_t record);
  // Counts flush groups of `lane` until group `group` is counted or the lane ends.
  absl::Status CountGroupsThrough(uint32_t lane, uint64_t group);
  // Counts the next groups of `lane` while `more(totals)` and the lane has groups.
  absl::Status Count(uint32_t lane, const std::function<bool(const LaneTotals&)>& more);
  // A stream of lane `lane` positioned at its batch b (nullopt: past the lane's end).
  absl::StatusOr<std::unique_ptr<LaneStream>> StreamAt(uint32_t lane, uint64_t b);

  const ResolvedPipeline resolved_;
  const std::shared_ptr<const WorkSource> source_;
  const int threads_;
  std::vector<LaneTotals> totals_;  // one per lane
  // Per lane: flush group -> records before it, known exactly (Anchor, AddAnchor).
  std::vector<std::map<uint64_t, uint64_t>> anchors_;
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_PROVENANCE_STEP_LOCATOR_H_
