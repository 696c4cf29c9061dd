#include "shm/futex.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <new>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace zephon::shm {
namespace {

TEST(FutexTest, TimesOutWhileTheWordIsUnchanged) {
  std::atomic<uint32_t> word{5};
  const absl::Time start = absl::Now();
  EXPECT_EQ(FutexWait(&word, 5, absl::Milliseconds(50)), FutexWaitResult::kTimedOut);
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(45));  // slop for clock granularity
}

TEST(FutexTest, ReturnsAtOnceWhenTheWordAlreadyChanged) {
  std::atomic<uint32_t> word{6};
  const absl::Time start = absl::Now();
  EXPECT_EQ(FutexWait(&word, 5, absl::Seconds(10)), FutexWaitResult::kWoken);
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

TEST(FutexTest, WakeAllWakesAThread) {
  std::atomic<uint32_t> word{0};
  FutexWaitResult result = FutexWaitResult::kTimedOut;
  std::thread waiter([&] { result = FutexWait(&word, 0, absl::Seconds(10)); });
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time start = absl::Now();
  word.fetch_add(1);
  FutexWakeAll(&word);
  waiter.join();
  EXPECT_EQ(result, FutexWaitResult::kWoken);
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST(FutexTest, WakesAnotherProcessThroughASharedMapping) {
  void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* word = new (mem) std::atomic<uint32_t>(0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const absl::Time start = absl::Now();
    // Non-private futex: only a cross-process wake ends this before 10 s.
    while (word->load() == 0 && absl::Now() - start < absl::Seconds(10)) {
      FutexWait(word, 0, absl::Seconds(10));
    }
    _exit(absl::Now() - start < absl::Seconds(5) ? 0 : 1);
  }
  absl::SleepFor(absl::Milliseconds(100));
  word->store(1);
  FutexWakeAll(word);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  munmap(mem, 4096);
}

}  // namespace
}  // namespace zephon::shm
