// ParallelBatches: a GroupStream whose batches are materialized on the daemon's shared
// WorkerPool and handed back in stream order: the bytes are those of
// GroupStream::Next() whatever the parallelism or the thread timing.
//
// The owner's thread plans batches in order (GroupStream::NextPlan: cheap, reads only
// sample lengths) and submits one Materialize task per plan to an OrderedStage
// (sequence number = batch number). At most `parallelism` materializations run at
// once and at most `queue_capacity` batches are planned but not yet returned; when
// the stage is full, planning stops until Next() hands a batch out (backpressure).
// Errors, whether planning or materializing, surface from Next() at the position of
// the batch they concern and are sticky.
//
// Thread-safety: single-owner (one producer thread), except Cancel(), Explain() and
// Packing(), which are thread-safe.
#ifndef ZEPHON_DAEMON_EXEC_PARALLEL_BATCHES_H_
#define ZEPHON_DAEMON_EXEC_PARALLEL_BATCHES_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/exec/ordered_stage.h"
#include "daemon/exec/worker_pool.h"
#include "daemon/pipeline/batching/batch.h"
#include "daemon/pipeline/batching/group_stream.h"

namespace zephon::exec {

class ParallelBatches {
 public:
  // `pool` may be null (everything inline). INVALID_ARGUMENT from OrderedStage.
  static absl::StatusOr<std::unique_ptr<ParallelBatches>> Create(
      std::unique_ptr<pipeline::GroupStream> stream, std::shared_ptr<WorkerPool> pool,
      OrderedStageOptions options);
  ParallelBatches(const ParallelBatches&) = delete;
  ParallelBatches& operator=(const ParallelBatches&) = delete;

  // The next batch in stream order, or nullopt once the stream ended (and forever
  // after). Plans ahead as far as the stage has room, then waits for the batch until
  // `deadline`. Errors: DEADLINE_EXCEEDED (not ready yet; call again, nothing is
  // lost), CANCELLED after Cancel(), or the stream's own error (sticky).
  absl::StatusOr<std::optional<pipeline::Batch>> Next(absl::Time deadline);

  // True when materialization runs on the producer thread (parallelism 1). Then the
  // owner uses NextPlan() and materializes each plan straight into its destination
  // (the ring slot), which saves a copy per batch.
  bool is_inline() const { return stage_->is_inline(); }
  // The next plan in stream order, or nullopt at the end. REQUIRES: is_inline(), and
  // Next() never called on this object.
  absl::StatusOr<std::optional<pipeline::BatchPlan>> NextPlan() { return stream_->NextPlan(); }
  // What plans are materialized from.
  const std::vector<std::shared_ptr<const pipeline::Dataset>>& datasets() const {
    return stream_->source()->datasets();
  }

  // Makes Next() and NextPlan() return CANCELLED (a plan in progress stops at its next
  // lane) and skips materializations not yet started.
  void Cancel() {
    cancelled_.store(true);
    stage_->Cancel();
  }

  // One line: "materialize: parallelism=P (pool|inline), queue_capacity=Q, ...".
  std::string Explain() const;
  uint32_t parallelism() const { return stage_->parallelism(); }
  uint32_t queue_capacity() const { return stage_->queue_capacity(); }
  OrderedStageStats stats() const { return stage_->stats(); }
  const pipeline::GroupStream& stream() const { return *stream_; }
  // GroupStream::Packing (thread-safe: atomic counters fixed at the stream's creation).
  std::vector<pipeline::PackFigures> Packing() const { return stream_->Packing(); }
  // GroupStream::Mixture (likewise thread-safe).
  std::vector<pipeline::MixtureFigures> Mixture() const { return stream_->Mixture(); }

 private:
  ParallelBatches(std::unique_ptr<pipeline::GroupStream> stream,
                  std::unique_ptr<OrderedStage<pipeline::Batch>> stage);
  // Submits plans while the stage has room and the stream has batches.
  absl::Status PlanAhead();

  const std::unique_ptr<pipeline::GroupStream> stream_;  // owner thread only
  const std::unique_ptr<OrderedStage<pipeline::Batch>> stage_;  // thread-safe
  bool planned_all_ = false;  // owner thread only
  // Set by Cancel() (any thread); the stream reads it between lanes.
  std::atomic<bool> cancelled_{false};
};

}  // namespace zephon::exec

#endif  // ZEPHON_DAEMON_EXEC_PARALLEL_BATCHES_H_
