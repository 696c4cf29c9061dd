// RunOrderedJobs: runs a list of fallible jobs on up to `parallel` threads (the calling
// thread and parallel - 1 it starts) and returns their results in list order, as a
// sequential loop that stops at the first failure would.
//
// Dataset::Open uses it to convert two shards of a dataset at once: one shard's head
// (reading its first block) and tail (its last blocks, the fsync and rename of its
// cache) leave the worker pool idle, and the other shard's blocks fill that time.
//
// Semantics: job i starts only after every job before it has started; once job f has
// failed, no job after f starts, and the result is the failure of the lowest-numbered
// failed job (the one a sequential loop would have met first), so the error does not
// depend on timing. On success, every job ran exactly once. When a thread cannot be
// started, the jobs run on the calling thread alone (sequentially).
// Thread-safety: the jobs must be safe to run concurrently with each other.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_ORDERED_JOBS_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_ORDERED_JOBS_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"

namespace zephon::pipeline {

// Runs jobs[0..n) as described above; OK when all succeeded.
absl::Status RunOrderedJobs(const std::vector<std::function<absl::Status()>>& jobs,
                            int parallel);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_ORDERED_JOBS_H_
