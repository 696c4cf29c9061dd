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

void DaemonCounters::CountCheckpointRound(bool ok, double seconds) {
  (ok ? rounds_ok_ : rounds_error_).fetch_add(1, kRelaxed);
  if (!ok) CountError(ErrorKind::kCheckpoint);
  round_seconds_.Observe(seconds);
}

}  // namespace zephon::metrics
