#include "daemon/pipeline/formats/ordered_jobs.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace zephon::pipeline {
namespace {

TEST(RunOrderedJobsTest, RunsEveryJobOnce) {
  for (int parallel : {1, 2, 4}) {
    std::vector<std::atomic<int>> runs(50);
    std::vector<std::function<absl::Status()>> jobs;
    for (size_t i = 0; i < runs.size(); ++i) {
      jobs.push_back([&runs, i] {
        ++runs[i];
        return absl::OkStatus();
      });
    }
    ASSERT_TRUE(RunOrderedJobs(jobs, parallel).ok());
    for (const auto& r : runs) EXPECT_EQ(r.load(), 1) << "parallel " << parallel;
  }
}

TEST(RunOrderedJobsTest, RunsTwoAtOnce) {
  // Job 0 waits until job 1 has started: only a second thread can let it finish.
  absl::Notification second_started;
  std::vector<std::function<absl::Status()>> jobs = {
      [&] {
        return second_started.WaitForNotificationWithTimeout(absl::Seconds(30))
                   ? absl::OkStatus()
                   : absl::DeadlineExceededError("job 1 never ran alongside job 0");
      },
      [&] {
        second_started.Notify();
        return absl::OkStatus();
      }};
  EXPECT_TRUE(RunOrderedJobs(jobs, 2).ok());
}

TEST(RunOrderedJobsTest, ReportsTheFirstFailureInListOrder) {
  // Job 3 fails at once, job 1 fails later: the sequential loop meets job 1 first.
  std::vector<std::function<absl::Status()>> jobs;
  std::atomic<bool> after_failure_ran{false};
  jobs.push_back([] { return absl::OkStatus(); });
  jobs.push_back([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    return absl::DataLossError("job 1");
  });
  jobs.push_back([] { return absl::OkStatus(); });
  jobs.push_back([] { return absl::NotFoundError("job 3"); });
  for (int i = 0; i < 20; ++i) {
    jobs.push_back([&after_failure_ran] {
      after_failure_ran = true;
      return absl::OkStatus();
    });
  }
  for (int parallel : {1, 2, 3}) {
    const absl::Status s = RunOrderedJobs(jobs, parallel);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_EQ(s.message(), "job 1");
  }
  // Jobs after a failure are not started once it is known (job 1 fails last, so some of
  // them may have started before; with one thread none does).
  after_failure_ran = false;
  EXPECT_FALSE(RunOrderedJobs(jobs, 1).ok());
  EXPECT_FALSE(after_failure_ran.load());
}

int ThreadsOfThisProcess() {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

TEST(RunOrderedJobsTest, StartsNoMoreThreadsThanJobs) {
  EXPECT_TRUE(RunOrderedJobs({}, 2).ok());
  // One job runs on the calling thread: no thread is started while it runs.
  const int before = ThreadsOfThisProcess();
  int during = 0;
  ASSERT_TRUE(RunOrderedJobs({[&] {
                                during = ThreadsOfThisProcess();
                                return absl::OkStatus();
                              }},
                             8)
                  .ok());
  EXPECT_EQ(during, before);
  // Two jobs with parallel 8: one more thread, not seven.
  absl::Notification both;
  std::atomic<int> started{0};
  std::atomic<int> peak{0};
  const auto job = [&] {
    if (++started == 2) both.Notify();
    both.WaitForNotificationWithTimeout(absl::Seconds(30));
    peak = std::max(peak.load(), ThreadsOfThisProcess());
    return absl::OkStatus();
  };
  ASSERT_TRUE(RunOrderedJobs({job, job}, 8).ok());
  EXPECT_EQ(peak.load(), before + 1);
}

}  // namespace
}  // namespace zephon::pipeline
