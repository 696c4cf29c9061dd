// RefusalLog: logs refused network calls (bad signatures, reports for runs this daemon
// does not lead) without handing the network a way to fill the disk or forge log lines:
// at most one line per `interval`, the next one saying how many were suppressed, and
// every caller-controlled text escaped (C escapes: a newline prints as \n) and cut to
// kMaxPrintableBytes.
//
// The interval is measured on the Env's clock (common/env.h), so a test decides it.
//
// Thread-safety: thread-safe.
#ifndef ZEPHON_DAEMON_CHECKPOINT_REFUSAL_LOG_H_
#define ZEPHON_DAEMON_CHECKPOINT_REFUSAL_LOG_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"

namespace zephon::checkpoint {

class RefusalLog {
 public:
  static constexpr size_t kMaxPrintableBytes = 160;

  // `env` must outlive the log.
  explicit RefusalLog(absl::Duration interval = absl::Seconds(1), Env* env = Env::Default())
      : interval_(interval), env_(env) {}

  // Logs "refused <what> from <peer>: <detail>" on the "peer" logger unless a line was
  // logged within the interval; returns whether it logged. `peer` and `detail` are
  // escaped here.
  bool Warn(absl::string_view what, absl::string_view peer, absl::string_view detail)
      ABSL_LOCKS_EXCLUDED(mu_);

  // `text` with non-printable bytes C-escaped, cut to kMaxPrintableBytes ("..." marks a cut).
  static std::string Printable(absl::string_view text);

 private:
  const absl::Duration interval_;
  Env* const env_;
  absl::Mutex mu_;
  absl::Time last_logged_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  uint64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_REFUSAL_LOG_H_
