// The metric families zephond exports: per-instance ring and reader figures and the
// shard and token caches' (zephon_shard_cache_*, zephon_token_cache_*) taken from a
// StatusReply snapshot, the daemon's DaemonCounters, and process/node figures.
//
// Thread-safety: thread-safe (pure functions; ReadProcessStats reads /proc and statvfs).
#ifndef ZEPHON_DAEMON_METRICS_DAEMON_METRICS_H_
#define ZEPHON_DAEMON_METRICS_DAEMON_METRICS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/metrics/counters.h"
#include "daemon/metrics/prometheus_text.h"
#include "proto/zephon.pb.h"

namespace zephon::metrics {

struct ProcessStats {
  double cpu_seconds = 0;
  uint64_t resident_bytes = 0;
  uint64_t shm_free_bytes = 0;  // statvfs of `shm_dir`; 0 when it cannot be read
  uint64_t shm_size_bytes = 0;  // its size; 0 likewise
};

// CPU time (all threads), current RSS (/proc/self/statm), size and free bytes of
// `shm_dir`.
ProcessStats ReadProcessStats(const std::string& shm_dir = "/dev/shm");

// Every family, in a stable order, named zephon_* (counters end in _total).
std::vector<MetricFamily> CollectDaemonMetrics(const proto::StatusReply& status,
                                               const DaemonCounters& counters,
                                               const ProcessStats& process);

}  // namespace zephon::metrics

#endif  // ZEPHON_DAEMON_METRICS_DAEMON_METRICS_H_
