// Process-wide event counters of zephond that no status snapshot can reconstruct:
// attaches, checkpoint rounds (count and duration), errors by kind.
//
// zephond's Daemon owns one and hands it (through options) to those who count: the
// gRPC service, pipeline instances, checkpoint rounds; the metrics scrape reads it.
// Thread-safety: thread-safe (relaxed atomics: counters only, no ordering promise).
#ifndef ZEPHON_DAEMON_METRICS_COUNTERS_H_
#define ZEPHON_DAEMON_METRICS_COUNTERS_H_

#include <atomic>
#include <cstdint>

#include "daemon/metrics/prometheus_text.h"

namespace zephon::metrics {

enum class ErrorKind : int {
  kPipeline = 0,    // the engine failed; the ring is poisoned
  kRing = 1,        // loan/write/publish into the ring failed
  kReaderDied = 2,  // a rank's connection closed without a detach
  kAttach = 3,      // an attach was refused
  kCheckpoint = 4,  // a checkpoint round failed
  kCount = 5,
};
const char* ErrorKindName(ErrorKind kind);

class DaemonCounters {
 public:
  DaemonCounters();
  DaemonCounters(const DaemonCounters&) = delete;
  DaemonCounters& operator=(const DaemonCounters&) = delete;

  void CountAttach(bool ok) { (ok ? attach_ok_ : attach_refused_).fetch_add(1, kRelaxed); }
  void CountError(ErrorKind kind) { errors_[static_cast<int>(kind)].fetch_add(1, kRelaxed); }
  void CountCheckpointRound(bool ok, double seconds);

  uint64_t attach_ok() const { return attach_ok_.load(kRelaxed); }
  uint64_t attach_refused() const { return attach_refused_.load(kRelaxed); }
  uint64_t errors(ErrorKind kind) const { return errors_[static_cast<int>(kind)].load(kRelaxed); }
  uint64_t rounds_ok() const { return rounds_ok_.load(kRelaxed); }
  uint64_t rounds_error() const { return rounds_error_.load(kRelaxed); }
  const Histogram& round_seconds() const { return round_seconds_; }

 private:
  static constexpr std::memory_order kRelaxed = std::memory_order_relaxed;

  std::atomic<uint64_t> attach_ok_{0};
  std::atomic<uint64_t> attach_refused_{0};
  std::atomic<uint64_t> rounds_ok_{0};
  std::atomic<uint64_t> rounds_error_{0};
  std::atomic<uint64_t> errors_[static_cast<int>(ErrorKind::kCount)] = {};
  Histogram round_seconds_;
};

}  // namespace zephon::metrics

#endif  // ZEPHON_DAEMON_METRICS_COUNTERS_H_
