#include "daemon/attach_progress_reporter.h"

#include <algorithm>
#include <system_error>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/time/clock.h"
#include "common/logging.h"

namespace zephon::daemon {
namespace {

std::shared_ptr<spdlog::logger> Log() { return SubsystemLogger("rpc"); }

}  // namespace

AttachProgressReporter::AttachProgressReporter(const pipeline::ConversionProgress* conversions,
                                               absl::Duration interval,
                                               DownloadedBytes downloaded)
    : conversions_(conversions), interval_(interval), downloaded_(std::move(downloaded)) {}

AttachWork AttachProgressReporter::Work() const {
  AttachWork work;
  work.conversions = conversions_->Get();
  if (downloaded_) work.downloaded_bytes = downloaded_();
  return work;
}

AttachProgressReporter::~AttachProgressReporter() {
  std::thread timer;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    changed_.SignalAll();
    timer = std::move(timer_);
  }
  if (timer.joinable()) timer.join();
}

AttachProgressReporter::Watch::~Watch() {
  if (id_ != 0) reporter_->Forget(id_);
}

AttachProgressReporter::Watch AttachProgressReporter::Report(Writer writer) {
  absl::MutexLock lock(&mu_);
  if (!EnsureTimer()) return Watch(this, 0);
  const uint64_t id = next_id_++;
  auto attach = std::make_unique<Attach>();
  attach->writer = std::move(writer);
  attach->start = absl::Now();
  attach->at_start = Work();
  attaches_.emplace(id, std::move(attach));
  changed_.SignalAll();
  return Watch(this, id);
}

void AttachProgressReporter::Forget(uint64_t id) {
  std::thread writer;
  {
    absl::MutexLock lock(&mu_);
    auto it = attaches_.find(id);
    if (it == attaches_.end()) return;
    it->second->done = true;
    changed_.SignalAll();
    writer = std::move(it->second->thread);
  }
  // Joined without the lock: the writer may be inside a Write, and reports of other
  // attaches go on meanwhile.
  if (writer.joinable()) writer.join();
  absl::MutexLock lock(&mu_);
  attaches_.erase(id);
}

bool AttachProgressReporter::EnsureTimer() {
  if (timer_.joinable()) return true;
  if (no_timer_) return false;
  try {
    timer_ = std::thread([this] { Time(); });
    return true;
  } catch (const std::system_error& e) {
    no_timer_ = true;
    Log()->warn("no thread for attach progress reports ({}): attaches go on without them",
                e.what());
    return false;
  }
}

void AttachProgressReporter::Time() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    absl::Time next = absl::InfiniteFuture();
    for (const auto& [id, attach] : attaches_) {
      if (!attach->handed_over && !attach->done) next = std::min(next, attach->start + interval_);
    }
    if (next > absl::Now()) {
      changed_.WaitWithDeadline(&mu_, next);
      continue;  // woken early (an attach came or went) or on time: look again
    }
    for (auto& [id, attach] : attaches_) {
      if (attach->handed_over || attach->done || attach->start + interval_ > absl::Now()) {
        continue;
      }
      attach->handed_over = true;
      Attach* const a = attach.get();
      try {
        attach->thread = std::thread([this, a] { ReportUntilDone(a); });
      } catch (const std::system_error& e) {
        Log()->warn("no thread for an attach's progress reports ({}): it goes on without them",
                    e.what());
      }
    }
  }
}

void AttachProgressReporter::ReportUntilDone(Attach* attach) {
  absl::MutexLock lock(&mu_);
  absl::Time due = attach->start + interval_;
  while (!attach->done) {
    if (absl::Now() < due) {
      changed_.WaitWithDeadline(&mu_, due);
      continue;
    }
    const absl::Time now = absl::Now();
    proto::AttachServerMessage message;
    *message.mutable_progress() =
        DescribeAttachProgress(attach->at_start, Work(), now - attach->start);
    // Written without the lock: Forget() joins this thread before it frees `attach`,
    // and the other attaches' reports and Forget()s go on meanwhile.
    mu_.Unlock();
    const bool listening = attach->writer(message);
    mu_.Lock();
    if (!listening) return;
    due = now + interval_;
  }
}

}  // namespace zephon::daemon
