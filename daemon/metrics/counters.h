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
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
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
  // A local checkpoint round's outcome, once per round: ok, timed out (a local rank or
  // the leader did not answer by the round's deadline) or failed otherwise.
  enum class RoundResult { kOk, kTimeout, kError };
  struct RoundOutcome {
    std::string run_id;
    uint64_t round = 0;
    RoundResult result = RoundResult::kOk;
    absl::Time started;   // the round's first local call
    absl::Time finished;  // its answer
    std::string error;    // the failure, for kTimeout and kError
  };
  // Counts the round and keeps it as the last one (status and `zephonctl top` show it).
  void CountCheckpointRound(RoundOutcome outcome) ABSL_LOCKS_EXCLUDED(last_round_mu_);
  std::optional<RoundOutcome> last_round() const ABSL_LOCKS_EXCLUDED(last_round_mu_);
  // Time from a round's local set being complete to the leader's answer.
  void ObserveRoundSeconds(double seconds) { round_seconds_.Observe(seconds); }

  uint64_t attach_ok() const { return attach_ok_.load(kRelaxed); }
  uint64_t attach_refused() const { return attach_refused_.load(kRelaxed); }
  uint64_t errors(ErrorKind kind) const { return errors_[static_cast<int>(kind)].load(kRelaxed); }
  uint64_t rounds_ok() const { return rounds_ok_.load(kRelaxed); }
  uint64_t rounds_error() const { return rounds_error_.load(kRelaxed); }
  uint64_t rounds_timeout() const { return rounds_timeout_.load(kRelaxed); }
  const Histogram& round_seconds() const { return round_seconds_; }

 private:
  static constexpr std::memory_order kRelaxed = std::memory_order_relaxed;

  std::atomic<uint64_t> attach_ok_{0};
  std::atomic<uint64_t> attach_refused_{0};
  std::atomic<uint64_t> rounds_ok_{0};
  std::atomic<uint64_t> rounds_error_{0};
  std::atomic<uint64_t> rounds_timeout_{0};
  mutable absl::Mutex last_round_mu_;
  std::optional<RoundOutcome> last_round_ ABSL_GUARDED_BY(last_round_mu_);
  std::atomic<uint64_t> errors_[static_cast<int>(ErrorKind::kCount)] = {};
  Histogram round_seconds_;
};

// "ok", "timeout", "error": the result label of zephon_checkpoint_rounds_total.
const char* RoundResultName(DaemonCounters::RoundResult result);

}  // namespace zephon::metrics

#endif  // ZEPHON_DAEMON_METRICS_COUNTERS_H_
