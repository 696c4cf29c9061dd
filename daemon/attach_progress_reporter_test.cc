#include "daemon/attach_progress_reporter.h"

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace zephon::daemon {
namespace {

// What a writer received, thread-safe.
class Received {
 public:
  AttachProgressReporter::Writer Writer(bool listening = true) {
    return [this, listening](const proto::AttachServerMessage& m) {
      absl::MutexLock lock(&mu_);
      messages_.push_back(m);
      return listening;
    };
  }
  std::vector<proto::AttachServerMessage> Get() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }
  size_t Size() { return Get().size(); }

 private:
  absl::Mutex mu_;
  std::vector<proto::AttachServerMessage> messages_ ABSL_GUARDED_BY(mu_);
};

bool WaitFor(const std::function<bool()>& cond, absl::Duration limit = absl::Seconds(10)) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    if (cond()) return true;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return cond();
}

TEST(AttachProgressReporterTest, ReportsEveryIntervalWhileTheAttachWorks) {
  pipeline::ConversionProgress conversions;
  AttachProgressReporter reporter(&conversions, absl::Milliseconds(20));
  Received got;
  {
    AttachProgressReporter::Watch watch = reporter.Report(got.Writer());
    conversions.Begin("/d/a.jsonl");
    conversions.Add(1'000'000);
    ASSERT_TRUE(WaitFor([&] { return got.Size() >= 3; }));
  }
  const std::vector<proto::AttachServerMessage> messages = got.Get();
  ASSERT_GE(messages.size(), 3u);
  for (size_t i = 0; i < messages.size(); ++i) {
    ASSERT_TRUE(messages[i].has_progress());
    if (i > 0) {
      EXPECT_GT(messages[i].progress().elapsed_s(), messages[i - 1].progress().elapsed_s());
    }
  }
  EXPECT_EQ(messages.back().progress().tokenized_bytes(), 1'000'000u);
  EXPECT_NE(messages.back().progress().activity().find("/d/a.jsonl"), std::string::npos);
  // The Watch is gone: nothing more is written to its stream.
  const size_t after = got.Size();
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(got.Size(), after);
}

TEST(AttachProgressReporterTest, AQuickAttachGetsNoReport) {
  pipeline::ConversionProgress conversions;
  AttachProgressReporter reporter(&conversions, absl::Milliseconds(200));
  Received got;
  { AttachProgressReporter::Watch watch = reporter.Report(got.Writer()); }
  absl::SleepFor(absl::Milliseconds(400));
  EXPECT_EQ(got.Size(), 0u);
}

TEST(AttachProgressReporterTest, AClientThatStoppedListeningGetsNoMore) {
  pipeline::ConversionProgress conversions;
  AttachProgressReporter reporter(&conversions, absl::Milliseconds(10));
  Received gone;
  Received other;
  AttachProgressReporter::Watch a = reporter.Report(gone.Writer(/*listening=*/false));
  AttachProgressReporter::Watch b = reporter.Report(other.Writer());
  ASSERT_TRUE(WaitFor([&] { return other.Size() >= 5; }));
  EXPECT_EQ(gone.Size(), 1u);  // its one write said the client left
}

TEST(AttachProgressReporterTest, DestroyingAWatchWaitsForTheWriteInFlight) {
  pipeline::ConversionProgress conversions;
  AttachProgressReporter reporter(&conversions, absl::Milliseconds(5));
  absl::Notification writing;
  absl::Notification release;
  std::atomic<bool> write_done{false};
  absl::Notification end;
  std::atomic<bool> destroyed{false};
  std::thread attach([&] {
    {
      const AttachProgressReporter::Watch watch =
          reporter.Report([&](const proto::AttachServerMessage&) {
            if (!writing.HasBeenNotified()) writing.Notify();
            release.WaitForNotification();
            write_done = true;
            return true;
          });
      end.WaitForNotification();
    }  // the attach is done: its Watch ends here
    destroyed = true;
  });
  ASSERT_TRUE(writing.WaitForNotificationWithTimeout(absl::Seconds(10)));
  end.Notify();
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(destroyed.load());  // the stream is still being written to
  release.Notify();
  attach.join();
  EXPECT_TRUE(destroyed.load());
  EXPECT_TRUE(write_done.load());
}

TEST(AttachProgressReporterTest, ASlowClientDoesNotHoldUpAnotherAttachesReports) {
  pipeline::ConversionProgress conversions;
  AttachProgressReporter reporter(&conversions, absl::Milliseconds(10));
  absl::Notification release;
  AttachProgressReporter::Watch slow = reporter.Report([&](const proto::AttachServerMessage&) {
    release.WaitForNotificationWithTimeout(absl::Seconds(10));
    return true;
  });
  Received fast;
  {
    // The slow client's writer is blocked (a client that stopped reading): the other
    // attach is reported all the same, and its Watch ends without waiting for the slow one.
    AttachProgressReporter::Watch watch = reporter.Report(fast.Writer());
    EXPECT_TRUE(WaitFor([&] { return fast.Size() >= 3; }));
  }
  EXPECT_FALSE(release.HasBeenNotified());
  release.Notify();
}

}  // namespace
}  // namespace zephon::daemon
