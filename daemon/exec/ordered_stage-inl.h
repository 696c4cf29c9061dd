// Template bodies of ordered_stage.h; include that header, not this one.
#ifndef ZEPHON_DAEMON_EXEC_ORDERED_STAGE_INL_H_
#define ZEPHON_DAEMON_EXEC_ORDERED_STAGE_INL_H_

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zephon::exec {

// Shared by the stage and its tasks in flight. Results live in a ring of
// queue_capacity slots indexed by sequence % capacity: at most capacity sequence
// numbers are outstanding, so two never share a slot.
template <typename T>
struct OrderedStage<T>::State {
  State(uint32_t parallelism, uint32_t capacity) : parallelism(parallelism), slots(capacity) {}

  // Submit may start another task.
  bool HasRoom() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return !status.ok() ||
           (in_flight < parallelism && next_submit - next_take < slots.size());
  }
  // Take may return.
  bool HeadReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return !status.ok() || slots[next_take % slots.size()].has_value();
  }
  // Records the result of `seq` (dropped once the stage failed or was cancelled).
  void Finish(uint64_t seq, absl::StatusOr<T> result) ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    --in_flight;
    if (!status.ok()) return;
    slots[seq % slots.size()].emplace(std::move(result));
    ++buffered;
    peak_buffered = std::max(peak_buffered, buffered);
  }
  bool Failed() const ABSL_LOCKS_EXCLUDED(mu) {
    absl::MutexLock lock(&mu);
    return !status.ok();
  }
  // Makes `s` sticky and frees every buffered result.
  void Fail(absl::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    if (status.ok()) status = std::move(s);
    for (auto& slot : slots) slot.reset();
    buffered = 0;
  }

  const uint32_t parallelism;
  mutable absl::Mutex mu;
  std::vector<std::optional<absl::StatusOr<T>>> slots ABSL_GUARDED_BY(mu);
  uint64_t next_submit ABSL_GUARDED_BY(mu) = 0;  // sequence number of the next Submit
  uint64_t next_take ABSL_GUARDED_BY(mu) = 0;    // sequence number of the next Take
  uint32_t in_flight ABSL_GUARDED_BY(mu) = 0;
  uint32_t buffered ABSL_GUARDED_BY(mu) = 0;
  uint32_t peak_in_flight ABSL_GUARDED_BY(mu) = 0;
  uint32_t peak_buffered ABSL_GUARDED_BY(mu) = 0;
  absl::Status status ABSL_GUARDED_BY(mu);  // sticky: CANCELLED or a task's error
};

template <typename T>
absl::StatusOr<std::unique_ptr<OrderedStage<T>>> OrderedStage<T>::Create(
    std::shared_ptr<WorkerPool> pool, OrderedStageOptions options) {
  if (options.parallelism == 0) {
    return absl::InvalidArgumentError("ordered stage parallelism must be >= 1");
  }
  uint32_t parallelism = 1;
  if (pool != nullptr && pool->num_threads() > 0) {
    parallelism = std::min(options.parallelism, pool->num_threads());
  }
  if (parallelism == 1) pool = nullptr;  // Inline: no hand-off for nothing.
  const uint32_t capacity = options.queue_capacity == 0
                                ? 2 * parallelism
                                : std::max(options.queue_capacity, parallelism);
  return std::unique_ptr<OrderedStage<T>>(
      new OrderedStage<T>(std::move(pool), parallelism, capacity));
}

template <typename T>
OrderedStage<T>::OrderedStage(std::shared_ptr<WorkerPool> pool, uint32_t parallelism,
                              uint32_t capacity)
    : pool_(std::move(pool)),
      parallelism_(parallelism),
      queue_capacity_(capacity),
      state_(std::make_shared<State>(parallelism, capacity)) {}

template <typename T>
OrderedStage<T>::~OrderedStage() {
  Cancel();
}

template <typename T>
absl::Status OrderedStage<T>::Submit(Task task, absl::Time deadline) {
  uint64_t seq = 0;
  {
    absl::MutexLock lock(&state_->mu);
    if (!state_->mu.AwaitWithDeadline(absl::Condition(state_.get(), &State::HasRoom),
                                      deadline)) {
      return absl::DeadlineExceededError("ordered stage full");
    }
    if (!state_->status.ok()) return state_->status;
    seq = state_->next_submit++;
    ++state_->in_flight;
    state_->peak_in_flight = std::max(state_->peak_in_flight, state_->in_flight);
  }
  if (pool_ == nullptr) {
    state_->Finish(seq, task());
    return absl::OkStatus();
  }
  absl::Status queued = pool_->Submit([state = state_, seq, task = std::move(task)]() {
    if (state->Failed()) {
      state->Finish(seq, absl::CancelledError("skipped"));  // Dropped by Finish.
      return;
    }
    state->Finish(seq, task());
  });
  if (!queued.ok()) {
    state_->Finish(seq, queued);
    return queued;
  }
  return absl::OkStatus();
}

template <typename T>
bool OrderedStage<T>::HasRoom() const {
  absl::MutexLock lock(&state_->mu);
  return state_->status.ok() && state_->HasRoom();
}

template <typename T>
absl::StatusOr<T> OrderedStage<T>::Take(absl::Time deadline) {
  State& s = *state_;
  absl::MutexLock lock(&s.mu);
  if (!s.status.ok()) return s.status;
  if (s.next_take == s.next_submit) {
    return absl::FailedPreconditionError("ordered stage: Take with nothing outstanding");
  }
  if (!s.mu.AwaitWithDeadline(absl::Condition(&s, &State::HeadReady), deadline)) {
    return absl::DeadlineExceededError(
        absl::StrCat("ordered stage: result ", s.next_take, " not ready"));
  }
  if (!s.status.ok()) return s.status;
  auto& slot = s.slots[s.next_take % s.slots.size()];
  absl::StatusOr<T> result = std::move(*slot);
  slot.reset();
  --s.buffered;
  ++s.next_take;
  if (!result.ok()) s.Fail(result.status());
  return result;
}

template <typename T>
uint64_t OrderedStage<T>::outstanding() const {
  absl::MutexLock lock(&state_->mu);
  return state_->next_submit - state_->next_take;
}

template <typename T>
void OrderedStage<T>::Cancel() {
  absl::MutexLock lock(&state_->mu);
  state_->Fail(absl::CancelledError("ordered stage cancelled"));
}

template <typename T>
OrderedStageStats OrderedStage<T>::stats() const {
  absl::MutexLock lock(&state_->mu);
  OrderedStageStats out;
  out.submitted = state_->next_submit;
  out.taken = state_->next_take;
  out.in_flight = state_->in_flight;
  out.buffered = state_->buffered;
  out.peak_in_flight = state_->peak_in_flight;
  out.peak_buffered = state_->peak_buffered;
  return out;
}

}  // namespace zephon::exec

#endif  // ZEPHON_DAEMON_EXEC_ORDERED_STAGE_INL_H_
