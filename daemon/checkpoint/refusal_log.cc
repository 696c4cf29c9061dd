#include "daemon/checkpoint/refusal_log.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/logging.h"

namespace zephon::checkpoint {

std::string RefusalLog::Printable(absl::string_view text) {
  std::string out = absl::CHexEscape(text.substr(0, kMaxPrintableBytes));
  if (out.size() > kMaxPrintableBytes) out.resize(kMaxPrintableBytes);
  if (text.size() > kMaxPrintableBytes || out.size() == kMaxPrintableBytes) out += "...";
  return out;
}

bool RefusalLog::Warn(absl::string_view what, absl::string_view peer,
                      absl::string_view detail) {
  uint64_t suppressed = 0;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = env_->Now();
    if (now - last_logged_ < interval_) {
      ++suppressed_;
      return false;
    }
    last_logged_ = now;
    suppressed = suppressed_;
    suppressed_ = 0;
  }
  SubsystemLogger("peer")->warn(
      "refused {} from {}: {}{}", std::string(what), Printable(peer), Printable(detail),
      suppressed == 0 ? std::string()
                      : absl::StrCat(" (", suppressed, " more refusals not logged)"));
  return true;
}

}  // namespace zephon::checkpoint
