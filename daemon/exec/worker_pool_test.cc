#include "daemon/exec/worker_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"

namespace zephon::exec {
namespace {

TEST(WorkerPoolTest, RunsEveryTaskOnItsThreads) {
  auto pool = WorkerPool::Create(3).value();
  EXPECT_EQ(pool->num_threads(), 3u);
  std::atomic<int> ran{0};
  std::vector<std::thread> submitters;
  for (int t = 0; t < 4; ++t) {
    submitters.emplace_back([&] {
      for (int i = 0; i < 50; ++i) ASSERT_TRUE(pool->Submit([&] { ++ran; }).ok());
    });
  }
  for (auto& t : submitters) t.join();
  pool->Shutdown();
  EXPECT_EQ(ran.load(), 200);
}

TEST(WorkerPoolTest, ShutdownDrainsAcceptedTasksThenRefusesNewOnes) {
  auto pool = WorkerPool::Create(1).value();
  absl::Notification release;
  std::atomic<int> ran{0};
  ASSERT_TRUE(pool->Submit([&] { release.WaitForNotification(); ++ran; }).ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(pool->Submit([&] { ++ran; }).ok());
  std::thread stopper([&] { pool->Shutdown(); });
  // The stopper waits for the queue; nothing new gets in meanwhile.
  while (pool->Submit([] {}).ok()) std::this_thread::yield();
  EXPECT_TRUE(absl::IsCancelled(pool->Submit([] {})));
  release.Notify();
  stopper.join();
  EXPECT_EQ(ran.load(), 6);
  pool->Shutdown();  // Idempotent.
}

TEST(WorkerPoolTest, AZeroThreadPoolRefusesTasks) {
  auto pool = WorkerPool::Create(0).value();
  EXPECT_EQ(pool->num_threads(), 0u);
  EXPECT_TRUE(absl::IsFailedPrecondition(pool->Submit([] {})));
}

TEST(WorkerPoolTest, AbsurdThreadCountsAreRefused) {
  EXPECT_TRUE(absl::IsInvalidArgument(WorkerPool::Create(kMaxWorkerThreads + 1).status()));
  EXPECT_GE(DefaultWorkerThreads(), 1u);
}

}  // namespace
}  // namespace zephon::exec
