#include "daemon/storage/s3_counters.h"

#include <algorithm>

namespace zephon::storage {

void S3Counters::Count(const std::string& op, int attempts, bool error) {
  absl::MutexLock lock(&mu_);
  Totals& t = totals_[op];
  ++t.requests;
  t.retries += static_cast<uint64_t>(std::max(attempts, 1) - 1);
  if (error) ++t.errors;
}

std::map<std::string, S3Counters::Totals> S3Counters::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return totals_;
}

}  // namespace zephon::storage
