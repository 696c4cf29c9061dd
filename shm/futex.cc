#include "shm/futex.h"

#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <climits>

#include "absl/time/clock.h"

namespace zephon::shm {
namespace {

static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t),
              "the kernel reads the atomic's storage as a plain u32");

long Futex(std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  // Not FUTEX_PRIVATE_FLAG: waiters and wakers live in different processes.
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op, value, timeout, nullptr, 0);
}

}  // namespace

FutexWaitResult FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
                          absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return word->load(std::memory_order_acquire) == expected ? FutexWaitResult::kTimedOut
                                                               : FutexWaitResult::kWoken;
    }
    // FUTEX_WAIT takes a relative timeout (CLOCK_MONOTONIC).
    const timespec ts = absl::ToTimespec(left);
    if (Futex(word, FUTEX_WAIT, expected, &ts) == 0) return FutexWaitResult::kWoken;
    switch (errno) {
      case EAGAIN:  // the word changed before we slept
        return FutexWaitResult::kWoken;
      case EINTR:  // a signal: sleep again for what is left
        continue;
      case ETIMEDOUT:
        return FutexWaitResult::kTimedOut;
      default:  // EFAULT/EINVAL cannot happen for a mapped aligned word; do not spin
        return FutexWaitResult::kWoken;
    }
  }
}

int FutexWakeAll(std::atomic<uint32_t>* word) {
  const long n = Futex(word, FUTEX_WAKE, INT_MAX, nullptr);
  return n < 0 ? 0 : static_cast<int>(n);
}

}  // namespace zephon::shm
