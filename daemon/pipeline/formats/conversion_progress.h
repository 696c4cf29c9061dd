// ConversionProgress: how far the node's text conversions (text_convert.h) have come,
// for the attaches that wait on them. A first attach of a large text corpus tokenizes
// it before the first batch; zephond reports these counters to the waiting clients, and
// a client's attach deadline runs from the last time they advanced instead of from the
// start (attach_timeout_s is the longest wait without progress).
//
// Counters are daemon-wide and only grow: a rank waiting on a DP-group peer's open, or
// on another attach converting the same shard, sees the conversion advance too.
//
// Thread-safe: every method may be called from any thread.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_CONVERSION_PROGRESS_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_CONVERSION_PROGRESS_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace zephon::pipeline {

class ConversionProgress {
 public:
  struct Snapshot {
    uint64_t text_bytes = 0;  // text tokenized by every conversion so far
    uint64_t files_done = 0;  // conversions finished (committed or failed)
    uint32_t active = 0;      // conversions running now
    std::string current;      // the file the newest running conversion reads ("" if none)
  };

  // A conversion of `file` starts / has tokenized `text_bytes` more / has ended.
  void Begin(const std::string& file) ABSL_LOCKS_EXCLUDED(mu_);
  void Add(uint64_t text_bytes) ABSL_LOCKS_EXCLUDED(mu_);
  void End() ABSL_LOCKS_EXCLUDED(mu_);

  Snapshot Get() const ABSL_LOCKS_EXCLUDED(mu_);
  // Get().active without copying the rest.
  uint32_t Active() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  Snapshot state_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_CONVERSION_PROGRESS_H_
