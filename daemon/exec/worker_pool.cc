#include "daemon/exec/worker_pool.h"

#include <algorithm>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zephon::exec {

uint32_t DefaultWorkerThreads() {
  return std::max<uint32_t>(1, std::thread::hardware_concurrency() / 2);
}

WorkerPool::WorkerPool(uint32_t num_threads, std::string name)
    : num_threads_(num_threads), name_(std::move(name)) {}

absl::StatusOr<std::unique_ptr<WorkerPool>> WorkerPool::Create(uint32_t num_threads,
                                                               std::string name) {
  if (num_threads > kMaxWorkerThreads) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", num_threads, " worker threads is too many (at most ", kMaxWorkerThreads,
        ")"));
  }
  std::unique_ptr<WorkerPool> pool(new WorkerPool(num_threads, std::move(name)));
  absl::MutexLock lock(&pool->join_mu_);
  pool->threads_.reserve(num_threads);
  for (uint32_t i = 0; i < num_threads; ++i) {
    try {
      pool->threads_.emplace_back([p = pool.get()] { p->WorkerLoop(); });
    } catch (const std::system_error& e) {
      // The destructor (after this lock is released) joins the threads already started.
      return absl::ResourceExhaustedError(
          absl::StrCat(pool->name_, ": cannot start worker thread ", i, ": ", e.what()));
    }
  }
  return pool;
}

WorkerPool::~WorkerPool() { Shutdown(); }

absl::Status WorkerPool::Submit(Task task) {
  if (num_threads_ == 0) {
    return absl::FailedPreconditionError(absl::StrCat(name_, " has no threads"));
  }
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::CancelledError(absl::StrCat(name_, " is shutting down"));
  queue_.push_back(std::move(task));
  return absl::OkStatus();
}

void WorkerPool::WorkerLoop() {
  while (true) {
    Task task;
    {
      absl::MutexLock lock(&mu_);
      // Workers wait on their own pool, never on another process: no deadline needed.
      mu_.Await(absl::Condition(this, &WorkerPool::HasWorkOrStop));
      if (queue_.empty()) return;  // Shutting down and drained.
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

bool WorkerPool::HasWorkOrStop() const { return shutting_down_ || !queue_.empty(); }

void WorkerPool::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
  }
  absl::MutexLock join_lock(&join_mu_);
  if (joined_) return;
  for (std::thread& t : threads_) t.join();
  joined_ = true;
}

size_t WorkerPool::queued() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

}  // namespace zephon::exec
