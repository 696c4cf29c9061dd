#include "daemon/metrics/counters.h"

namespace zephon::metrics {

const char* ErrorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kPipeline: return "pipeline";
    case ErrorKind::kRing: return "ring";
    case ErrorKind::kReaderDied: return "reader_died";
    case ErrorKind::kAttach: return "attach";
    case ErrorKind::kCheckpoint: return "checkpoint";
    case ErrorKind::kCount: break;
  }
  return "unknown";
}

DaemonCounters::DaemonCounters() : round_seconds_({0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120}) {}

void DaemonCounters::CountCheckpointRound(RoundOutcome outcome) {
  switch (outcome.result) {
    case RoundResult::kOk:
      rounds_ok_.fetch_add(1, kRelaxed);
      break;
    case RoundResult::kTimeout:
      rounds_timeout_.fetch_add(1, kRelaxed);
      CountError(ErrorKind::kCheckpoint);
      break;
    case RoundResult::kError:
      rounds_error_.fetch_add(1, kRelaxed);
      CountError(ErrorKind::kCheckpoint);
      break;
  }
  absl::MutexLock lock(&last_round_mu_);
  last_round_ = std::move(outcome);
}

std::optional<DaemonCounters::RoundOutcome> DaemonCounters::last_round() const {
  absl::MutexLock lock(&last_round_mu_);
  return last_round_;
}

const char* RoundResultName(DaemonCounters::RoundResult result) {
  switch (result) {
    case DaemonCounters::RoundResult::kOk: return "ok";
    case DaemonCounters::RoundResult::kTimeout: return "timeout";
    case DaemonCounters::RoundResult::kError: return "error";
  }
  return "unknown";
}

}  // namespace zephon::metrics
