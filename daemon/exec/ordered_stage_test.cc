#include "daemon/exec/ordered_stage.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace zephon::exec {
namespace {

using Stage = OrderedStage<int>;

absl::Time Soon() { return absl::Now() + absl::Seconds(10); }

// Random sleeps of 0..max_us microseconds, so tasks finish out of order.
std::vector<int> RandomSleepsUs(int n, int max_us, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int> out(n);
  for (int& v : out) v = static_cast<int>(rng() % (max_us + 1));
  return out;
}

// Submits n tasks returning 0..n-1 after the given sleeps and takes every result.
std::vector<int> RunAll(Stage* stage, const std::vector<int>& sleeps_us) {
  std::vector<int> out;
  for (int i = 0; i < static_cast<int>(sleeps_us.size()); ++i) {
    while (!stage->HasRoom()) out.push_back(stage->Take(Soon()).value());
    const int us = sleeps_us[i];
    EXPECT_TRUE(stage
                    ->Submit(
                        [i, us]() -> absl::StatusOr<int> {
                          absl::SleepFor(absl::Microseconds(us));
                          return i;
                        },
                        Soon())
                    .ok());
  }
  while (stage->outstanding() > 0) out.push_back(stage->Take(Soon()).value());
  return out;
}

std::vector<int> Iota(int n) {
  std::vector<int> v(n);
  for (int i = 0; i < n; ++i) v[i] = i;
  return v;
}

TEST(OrderedStageTest, ResultsComeOutInSequenceWhateverTheFinishOrder) {
  std::shared_ptr<WorkerPool> pool = WorkerPool::Create(4).value();
  auto stage = Stage::Create(pool, {4, 8}).value();
  EXPECT_FALSE(stage->is_inline());
  EXPECT_EQ(RunAll(stage.get(), RandomSleepsUs(200, 2000, 1)), Iota(200));
}

TEST(OrderedStageTest, InlineModeGivesTheSameResultsOnTheCallingThread) {
  std::shared_ptr<WorkerPool> pool = WorkerPool::Create(4).value();
  for (auto [p, threads] : {std::pair{1u, 4u}, std::pair{4u, 0u}}) {
    auto stage = Stage::Create(threads == 0 ? nullptr : pool, {p, 0}).value();
    EXPECT_TRUE(stage->is_inline());
    EXPECT_EQ(stage->parallelism(), 1u);
    const std::thread::id me = std::this_thread::get_id();
    ASSERT_TRUE(stage
                    ->Submit(
                        [me]() -> absl::StatusOr<int> {
                          return std::this_thread::get_id() == me ? 1 : 0;
                        },
                        Soon())
                    .ok());
    EXPECT_EQ(stage->Take(Soon()).value(), 1);
    EXPECT_EQ(RunAll(stage.get(), RandomSleepsUs(20, 10, 2)), Iota(20));
  }
}

TEST(OrderedStageTest, ParallelismIsCappedAtThePoolSize) {
  std::shared_ptr<WorkerPool> pool = WorkerPool::Create(2).value();
  auto stage = Stage::Create(pool, {8, 3}).value();
  EXPECT_EQ(stage->parallelism(), 2u);
  EXPECT_EQ(stage->queue_capacity(), 3u);
  EXPECT_EQ(Stage::Create(pool, {2, 1}).value()->queue_capacity(), 2u);
  EXPECT_EQ(Stage::Create(pool, {2, 0}).value()->queue_capacity(), 4u);
  EXPECT_TRUE(absl::IsInvalidArgument(Stage::Create(pool, {0, 0}).status()));
}

TEST(OrderedStageTest, TwoStagesShareOnePool) {
  std::shared_ptr<WorkerPool> pool = WorkerPool::Create(3).value();
  std::vector<int> a, b;
  std::thread ta([&] {
    auto stage = Stage::Create(pool, {3, 6}).value();
    a = RunAll(stage.get(), RandomSleepsUs(100, 1000, 3));
  });
  std::thread tb([&] {
    auto stage = Stage::Create(pool, {2, 2}).value();
    b = RunAll(stage.get(), RandomSleepsUs(100, 1000, 4));
  });
  ta.join();
  tb.join();
  EXPECT_EQ(a, Iota(100));
  EXPECT_EQ(b, Iota(100));
}

TEST(OrderedStageTest, NeverMoreThanParallelismInFlightNorCapacityBuffered) {
  std::shared_ptr<WorkerPool> pool = WorkerPool::Create(6).value();
  auto stage = Stage::Create(pool, {3, 5}).value();
  std::atomic<int> running{0}, peak_running{0};
  std::vector<int> sleeps = RandomSleepsUs(120, 1500, 5);
  std::vector<int> out;
  for (int i = 0; i < 120; ++i) {
    // A slow consumer: the submitter must be held back, not buffered without bound.
    if (i % 7 == 0) absl::SleepFor(absl::Milliseconds(2));
    absl::Status submitted = absl::DeadlineExceededError("");
    while (absl::IsDeadlineExceeded(submitted)) {
      submitted = stage->Submit(
          [&, i, us = sleeps[i]]() -> absl::StatusOr<int> {
            const int now = ++running;
            int peak = peak_running.load();
            while (now > peak && !peak_running.compare_exchange_weak(peak, now)) {
            }
            absl::SleepFor(absl::Microseconds(us));
            --running;
            return i;
          },
          absl::Now() + absl::Milliseconds(1));
      if (absl::IsDeadlineExceeded(submitted)) out.push_back(stage->Take(Soon()).value());
    }
    ASSERT_TRUE(submitted.ok()) << submitted;
    EXPECT_LE(stage->outstanding(), 5u);
  }
  while (stage->outstanding() > 0) out.push_back(stage->Take(Soon()).value());
  EXPECT_EQ(out, Iota(120));
  const OrderedStageStats stats = stage->stats();
  EXPECT_LE(peak_running.load(), 3);
  EXPECT_LE(stats.peak_in_flight, 3u);
  EXPECT_LE(stats.peak_buffered, 5u);
  EXPECT_GE(stats.peak_buffered, 1u);
  EXPECT_EQ(stats.submitted, 120u);
  EXPECT_EQ(stats.taken, 120u);
}

TEST(OrderedStageTest, AnErrorSurfacesAtItsSequencePositionAndSticks) {
  std::shared_ptr<WorkerPool> pool = WorkerPool::Create(4).value();
  auto stage = Stage::Create(pool, {4, 16}).value();
  for (int i = 0; i < 12; ++i) {
    ASSERT_TRUE(stage
                    ->Submit(
                        [i]() -> absl::StatusOr<int> {
                          // The failing task finishes first; later ones still succeed.
                          absl::SleepFor(absl::Microseconds(i == 5 ? 0 : 300 * (12 - i)));
                          if (i == 5) return absl::DataLossError("bad shard");
                          return i;
                        },
                        Soon())
                    .ok());
  }
  for (int i = 0; i < 5; ++i) EXPECT_EQ(stage->Take(Soon()).value(), i);
  absl::StatusOr<int> fifth = stage->Take(Soon());
  EXPECT_TRUE(absl::IsDataLoss(fifth.status())) << fifth.status();
  EXPECT_TRUE(absl::IsDataLoss(stage->Take(Soon()).status()));
  EXPECT_TRUE(absl::IsDataLoss(stage->Submit([] { return 0; }, Soon())));
}

TEST(OrderedStageTest, WaitsEndAtTheirDeadline) {
  std::shared_ptr<WorkerPool> pool = WorkerPool::Create(2).value();
  auto stage = Stage::Create(pool, {2, 2}).value();
  absl::Notification release;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(stage
                    ->Submit(
                        [&release, i]() -> absl::StatusOr<int> {
                          release.WaitForNotification();
                          return i;
                        },
                        Soon())
                    .ok());
  }
  const absl::Time t0 = absl::Now();
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      stage->Submit([] { return 9; }, absl::Now() + absl::Milliseconds(20))));
  EXPECT_TRUE(absl::IsDeadlineExceeded(stage->Take(absl::Now() + absl::Milliseconds(20)).status()));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  release.Notify();
  EXPECT_EQ(stage->Take(Soon()).value(), 0);
  EXPECT_EQ(stage->Take(Soon()).value(), 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(stage->Take(Soon()).status()));
}

TEST(OrderedStageTest, CancelWakesAWaitingTake) {
  std::shared_ptr<WorkerPool> pool = WorkerPool::Create(2).value();
  auto stage = Stage::Create(pool, {2, 2}).value();
  absl::Notification release;
  ASSERT_TRUE(stage
                  ->Submit(
                      [&release]() -> absl::StatusOr<int> {
                        release.WaitForNotification();
                        return 1;
                      },
                      Soon())
                  .ok());
  std::thread canceller([&] {
    absl::SleepFor(absl::Milliseconds(20));
    stage->Cancel();
  });
  const absl::Time t0 = absl::Now();
  EXPECT_TRUE(absl::IsCancelled(stage->Take(absl::Now() + absl::Seconds(30)).status()));
  EXPECT_LT(absl::Now() - t0, absl::Seconds(10));
  canceller.join();
  release.Notify();
}

TEST(OrderedStageTest, DestroyingWithTasksInFlightDoesNotWaitForThem) {
  std::shared_ptr<WorkerPool> pool = WorkerPool::Create(2).value();
  // Both workers busy: the stage's tasks sit in the pool's queue.
  absl::Notification release;
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(pool->Submit([&release] { release.WaitForNotification(); }).ok());
  }
  auto ran = std::make_shared<std::atomic<int>>(0);
  {
    auto stage = Stage::Create(pool, {2, 4}).value();
    for (int i = 0; i < 2; ++i) {
      ASSERT_TRUE(stage->Submit([ran]() -> absl::StatusOr<int> { return ++*ran; }, Soon()).ok());
    }
    const absl::Time t0 = absl::Now();
    stage.reset();
    EXPECT_LT(absl::Now() - t0, absl::Seconds(1));
  }
  release.Notify();
  pool->Shutdown();  // Drains the queue: the dead stage's tasks are skipped.
  EXPECT_EQ(ran->load(), 0);
}

}  // namespace
}  // namespace zephon::exec
