#include "daemon/pipeline/formats/ordered_jobs.h"

#include <algorithm>
#include <system_error>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace zephon::pipeline {
namespace {

// The shared cursor: which job starts next, and the lowest failure so far.
class JobQueue {
 public:
  explicit JobQueue(const std::vector<std::function<absl::Status()>>& jobs) : jobs_(jobs) {}

  // Runs jobs until none is left to start.
  void Drain() {
    while (true) {
      size_t i;
      {
        absl::MutexLock lock(&mu_);
        if (next_ >= jobs_.size() || next_ > failed_at_) return;
        i = next_++;
      }
      absl::Status s = jobs_[i]();
      if (!s.ok()) {
        absl::MutexLock lock(&mu_);
        if (i < failed_at_) {
          failed_at_ = i;
          failure_ = std::move(s);
        }
      }
    }
  }

  absl::Status Result() {
    absl::MutexLock lock(&mu_);
    return failure_;
  }

 private:
  const std::vector<std::function<absl::Status()>>& jobs_;
  absl::Mutex mu_;
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;
  size_t failed_at_ ABSL_GUARDED_BY(mu_) = static_cast<size_t>(-1);
  absl::Status failure_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

absl::Status RunOrderedJobs(const std::vector<std::function<absl::Status()>>& jobs,
                            int parallel) {
  if (jobs.empty()) return absl::OkStatus();
  JobQueue queue(jobs);
  // jobs is not empty, so this is >= 0: never more threads than jobs.
  const size_t extra = std::min(jobs.size(), static_cast<size_t>(std::max(parallel, 1))) - 1;
  std::vector<std::thread> helpers;
  for (size_t t = 0; t < extra; ++t) {
    try {
      helpers.emplace_back([&queue] { queue.Drain(); });
    } catch (const std::system_error&) {
      break;  // no thread to be had: fewer run at once, none is lost
    }
  }
  queue.Drain();
  for (std::thread& t : helpers) t.join();
  return queue.Result();
}

}  // namespace zephon::pipeline
