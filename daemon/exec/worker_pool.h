// WorkerPool: the daemon's one fixed set of worker threads, shared by every
// PipelineInstance of a zephond (`--worker-threads`), so N ranks on a node never mean
// N times the threads. Tasks run in FIFO order of submission; the pool knows nothing
// of instances or ordering (OrderedStage, ordered_stage.h, adds sequence numbers and
// bounds how many tasks one instance may have queued, which keeps the FIFO fair).
//
// Tasks must not block on other tasks or on another process: they are short, bounded
// pieces of work (materializing one batch).
//
// Shutdown drains: Shutdown() (and the destructor) stops accepting tasks, lets the
// workers run every task already accepted, then joins them. So every accepted task
// runs exactly once, which is what lets submitters rely on a completion callback.
//
// Thread-safety: thread-safe. A pool with 0 threads is valid and accepts no tasks
// (callers run their work inline).
#ifndef ZEPHON_DAEMON_EXEC_WORKER_POOL_H_
#define ZEPHON_DAEMON_EXEC_WORKER_POOL_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace zephon::exec {

// Upper bound for --worker-threads: a guard against typos, not a tuning value.
inline constexpr uint32_t kMaxWorkerThreads = 1024;

// max(1, hardware_concurrency / 2): leaves half the cores to the trainer processes.
uint32_t DefaultWorkerThreads();

class WorkerPool {
 public:
  using Task = std::function<void()>;

  // Starts `num_threads` workers named `name` in logs. INVALID_ARGUMENT if
  // num_threads > kMaxWorkerThreads; RESOURCE_EXHAUSTED if a thread cannot start.
  static absl::StatusOr<std::unique_ptr<WorkerPool>> Create(uint32_t num_threads,
                                                            std::string name = "workers");
  ~WorkerPool();  // Shutdown().
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // Queues `task` to run on a worker. CANCELLED after Shutdown (the task is destroyed
  // without running); FAILED_PRECONDITION on a pool of 0 threads.
  absl::Status Submit(Task task) ABSL_LOCKS_EXCLUDED(mu_);

  // Stops accepting tasks, runs the queued ones, joins the workers. Idempotent.
  // REQUIRES: not called from a worker (a task must not shut its own pool down).
  void Shutdown() ABSL_LOCKS_EXCLUDED(mu_);

  uint32_t num_threads() const { return num_threads_; }
  // Tasks accepted but not yet started (for status; instantly stale).
  size_t queued() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  WorkerPool(uint32_t num_threads, std::string name);
  void WorkerLoop() ABSL_LOCKS_EXCLUDED(mu_);
  bool HasWorkOrStop() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint32_t num_threads_;
  const std::string name_;

  mutable absl::Mutex mu_;
  std::deque<Task> queue_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;

  // Started by Create, joined by Shutdown; join_mu_ serializes concurrent Shutdowns
  // (never held together with mu_).
  absl::Mutex join_mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(join_mu_);
  bool joined_ ABSL_GUARDED_BY(join_mu_) = false;
};

}  // namespace zephon::exec

#endif  // ZEPHON_DAEMON_EXEC_WORKER_POOL_H_
