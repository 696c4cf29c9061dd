// S3Counters: what the S3 requests of every S3Store sharing it came to, per operation
// ("GET", "PUT", "HEAD", "DELETE", "LIST"), since it was created: requests (one per
// call, however many attempts), retries (attempts after the first) and errors (calls
// that ended in a transport failure or an HTTP status >= 400 other than 404, which is
// an answer, not a fault). zephond hands one to every store through S3Options and
// exports it (zephon_s3_*_total).
//
// Thread-safety: thread-safe.
#ifndef ZEPHON_DAEMON_STORAGE_S3_COUNTERS_H_
#define ZEPHON_DAEMON_STORAGE_S3_COUNTERS_H_

#include <cstdint>
#include <map>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace zephon::storage {

class S3Counters {
 public:
  struct Totals {
    uint64_t requests = 0;
    uint64_t retries = 0;
    uint64_t errors = 0;
  };

  // One call of operation `op` that took `attempts` (>= 1) attempts.
  void Count(const std::string& op, int attempts, bool error);
  // Per operation, only those counted at least once.
  std::map<std::string, Totals> Snapshot() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, Totals> totals_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_S3_COUNTERS_H_
