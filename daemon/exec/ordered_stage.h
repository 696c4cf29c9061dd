// OrderedStage<T>: runs a stream of tasks on the shared WorkerPool with bounded
// parallelism and hands their results back strictly in submission order, so what a
// caller does with the results never depends on thread timing.
//
// Model: the i-th Submit gets sequence number i. Take returns the result of the oldest
// sequence number not yet taken, waiting for it if needed; results that finish early
// wait in a reorder buffer. Bounds (backpressure):
//   * at most parallelism() tasks are queued or running in the pool at once;
//   * at most queue_capacity() sequence numbers are outstanding (submitted, not yet
//     taken), so at most queue_capacity() results are ever buffered. Submit waits for
//     room: a submitter that runs ahead of Take is blocked, never buffered unboundedly.
// Inline mode: with an effective parallelism of 1 (options.parallelism 1, no pool, or
// a pool of 0 threads) Submit runs the task on the calling thread. Results, and so
// bytes, are the same in both modes; only the timing differs.
// Errors: a task's error is returned by Take at that task's sequence position and is
// then sticky (every later Submit / Take returns it; results after it are discarded).
// Cancel() is sticky too (CANCELLED) and wakes every waiter.
// Every wait takes a deadline and returns DEADLINE_EXCEEDED when it passes, so callers
// can re-check their own stop flag.
// Lifetime: the stage may be destroyed with tasks in flight; they keep the shared
// state alive, skip their work if not yet started, and drop their results. A task must
// therefore own (or share) whatever it touches.
//
// Thread-safety: thread-safe; results are produced in order for one submitter. Submit
// is meant for one producer thread (calls from several threads are serialized but
// their sequence order is then whatever the lock decides).
#ifndef ZEPHON_DAEMON_EXEC_ORDERED_STAGE_H_
#define ZEPHON_DAEMON_EXEC_ORDERED_STAGE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/exec/worker_pool.h"

namespace zephon::exec {

// Default parallelism of a stage when the client asks for 0 (ExecutionOptions).
inline constexpr uint32_t kDefaultParallelism = 2;

struct OrderedStageOptions {
  // Tasks in the pool at once; capped at the pool's thread count. >= 1.
  uint32_t parallelism = kDefaultParallelism;
  // Outstanding sequence numbers (and so buffered results). 0 = 2 * effective
  // parallelism; otherwise raised to the effective parallelism if below it.
  uint32_t queue_capacity = 0;
};

// Counters for status and tests; a consistent snapshot.
struct OrderedStageStats {
  uint64_t submitted = 0;
  uint64_t taken = 0;
  uint32_t in_flight = 0;       // queued or running now
  uint32_t buffered = 0;        // finished, not yet taken
  uint32_t peak_in_flight = 0;  // high-water marks since creation
  uint32_t peak_buffered = 0;
};

template <typename T>
class OrderedStage {
 public:
  using Task = std::function<absl::StatusOr<T>()>;

  // `pool` may be null (inline). INVALID_ARGUMENT if options.parallelism is 0.
  static absl::StatusOr<std::unique_ptr<OrderedStage>> Create(std::shared_ptr<WorkerPool> pool,
                                                              OrderedStageOptions options);
  ~OrderedStage();  // Cancel(); does not wait for tasks in flight (see Lifetime).
  OrderedStage(const OrderedStage&) = delete;
  OrderedStage& operator=(const OrderedStage&) = delete;

  // Waits (until `deadline`) for room, then starts `task` as the next sequence number
  // (inline: runs it before returning). Errors: DEADLINE_EXCEEDED (no room in time;
  // the task was not taken, retry), CANCELLED, the sticky error of an earlier Take, or
  // the pool's refusal (CANCELLED while the daemon shuts down; it becomes this
  // sequence number's result too).
  absl::Status Submit(Task task, absl::Time deadline);
  // True if Submit would start a task now without waiting.
  bool HasRoom() const;
  // The result of the oldest outstanding sequence number, waiting until `deadline`.
  // Errors: DEADLINE_EXCEEDED (not finished yet; retry), FAILED_PRECONDITION (nothing
  // outstanding), CANCELLED, or the task's own error (sticky from then on).
  absl::StatusOr<T> Take(absl::Time deadline);
  // Submitted and not yet taken.
  uint64_t outstanding() const;
  // Sticky CANCELLED; wakes waiters; tasks not yet started are skipped.
  void Cancel();

  uint32_t parallelism() const { return parallelism_; }  // effective
  uint32_t queue_capacity() const { return queue_capacity_; }
  bool is_inline() const { return pool_ == nullptr; }
  OrderedStageStats stats() const;

 private:
  struct State;
  OrderedStage(std::shared_ptr<WorkerPool> pool, uint32_t parallelism, uint32_t capacity);

  const std::shared_ptr<WorkerPool> pool_;  // null in inline mode
  const uint32_t parallelism_;
  const uint32_t queue_capacity_;
  const std::shared_ptr<State> state_;  // shared with the tasks in flight
};

}  // namespace zephon::exec

#include "daemon/exec/ordered_stage-inl.h"

#endif  // ZEPHON_DAEMON_EXEC_ORDERED_STAGE_H_
