#include "daemon/exec/parallel_batches.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/pipeline/batching/lane_stream.h"

namespace zephon::exec {

absl::StatusOr<std::unique_ptr<ParallelBatches>> ParallelBatches::Create(
    std::unique_ptr<pipeline::GroupStream> stream, std::shared_ptr<WorkerPool> pool,
    OrderedStageOptions options) {
  absl::StatusOr<std::unique_ptr<OrderedStage<pipeline::Batch>>> stage =
      OrderedStage<pipeline::Batch>::Create(std::move(pool), options);
  if (!stage.ok()) return stage.status();
  return std::unique_ptr<ParallelBatches>(
      new ParallelBatches(std::move(stream), *std::move(stage)));
}

ParallelBatches::ParallelBatches(std::unique_ptr<pipeline::GroupStream> stream,
                                 std::unique_ptr<OrderedStage<pipeline::Batch>> stage)
    : stream_(std::move(stream)), stage_(std::move(stage)) {
  stream_->set_cancel_flag(&cancelled_);
}

absl::Status ParallelBatches::PlanAhead() {
  while (!planned_all_ && stage_->HasRoom()) {
    absl::StatusOr<std::optional<pipeline::BatchPlan>> plan = stream_->NextPlan();
    OrderedStage<pipeline::Batch>::Task task;
    if (!plan.ok()) {
      // Surfaces in order, after the batches planned before it.
      planned_all_ = true;
      task = [status = plan.status()]() -> absl::StatusOr<pipeline::Batch> { return status; };
    } else if (!plan->has_value()) {
      planned_all_ = true;
      break;
    } else {
      task = [source = stream_->source(), p = std::move(**plan)]() {
        return pipeline::Materialize(p, source->datasets());
      };
    }
    // HasRoom held and only this thread submits, so the stage cannot be full; a
    // non-OK result is the stage's sticky error, which Take reports.
    absl::Status submitted = stage_->Submit(std::move(task), absl::InfinitePast());
    if (!submitted.ok()) return submitted;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<pipeline::Batch>> ParallelBatches::Next(absl::Time deadline) {
  absl::Status planned = PlanAhead();
  if (!planned.ok()) return planned;
  if (stage_->outstanding() == 0) {
    if (planned_all_) return std::optional<pipeline::Batch>();
    // Empty yet not finished: only a cancelled/failed stage refuses room.
    absl::StatusOr<pipeline::Batch> failed = stage_->Take(deadline);
    return failed.status();
  }
  absl::StatusOr<pipeline::Batch> batch = stage_->Take(deadline);
  if (!batch.ok()) return batch.status();
  return std::optional<pipeline::Batch>(*std::move(batch));
}

std::string ParallelBatches::Explain() const {
  const OrderedStageStats s = stage_->stats();
  return absl::StrCat("materialize: parallelism=", stage_->parallelism(),
                      stage_->is_inline() ? " (inline on the producer thread)"
                                          : " (tasks on the shared worker pool)",
                      ", queue_capacity=", stage_->queue_capacity(),
                      " batches (reorder window), in_flight=", s.in_flight,
                      " buffered=", s.buffered, " peak_buffered=", s.peak_buffered);
}

}  // namespace zephon::exec
