// File: shm/futex.h
//
// Cross-process futex wait/wake on a 32-bit word inside a shared mapping. These use the
// shared (non-FUTEX_PRIVATE) operations: C++20 atomic wait/notify keeps per-process
// waiter tables and cannot wake another process.
//
// Protocol for a waiter (avoids lost wakeups): read the word, re-check the condition,
// then FutexWait on the value read. A waker changes the word first, then wakes.
// Thread-safe; async-signal-safe apart from clock reads.
#ifndef ZEPHON_SHM_FUTEX_H_
#define ZEPHON_SHM_FUTEX_H_

#include <atomic>
#include <cstdint>

#include "absl/time/time.h"

namespace zephon::shm {

enum class FutexWaitResult {
  kWoken,     // woken, spuriously returned, or the word no longer held `expected`
  kTimedOut,  // `timeout` elapsed while the word held `expected`
};

// Sleeps while *word == expected, for at most `timeout` (a non-positive timeout returns
// kTimedOut at once unless the word already changed). EINTR is retried with the remaining
// time. The caller always re-checks its condition: kWoken promises no state change.
FutexWaitResult FutexWait(std::atomic<uint32_t>* word, uint32_t expected,
                          absl::Duration timeout);

// Wakes every process and thread sleeping on `word`. Returns the number woken.
int FutexWakeAll(std::atomic<uint32_t>* word);

// A pause hint for short spin loops before falling back to the futex.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

}  // namespace zephon::shm

#endif  // ZEPHON_SHM_FUTEX_H_
