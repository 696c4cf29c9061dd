// File: tests/bench/ring/processes.h
//
// Process plumbing for the ring benchmark: unique shm names that are unlinked even when
// the run is interrupted, memory shared with forked children for control words and
// results, and forking/joining reader processes with a deadline.
//
// Thread safety: call from the main thread of a single-threaded process (fork() is only
// safe there). The signal handler is async-signal-safe.
#ifndef ZEPHON_TESTS_BENCH_RING_PROCESSES_H_
#define ZEPHON_TESTS_BENCH_RING_PROCESSES_H_

#include <sys/mman.h>
#include <sys/types.h>

#include <functional>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace zephon::shm::bench {

// Prefix of every ring memfd this process creates: "zephon-bench.<pid>.".
std::string BenchShmPrefix();

// "zephon-bench.<pid>.<tag>.<n>": a ring (memfd) name. Rings are memfds, so nothing
// needs removing when the benchmark is interrupted.
std::string BenchShmName(absl::string_view tag);

// Memory shared with children forked after Create (MAP_SHARED | MAP_ANONYMOUS): control
// words and results cross the fork here, not through the ring under test.
// T must be trivially destructible (children _exit; nobody runs destructors there).
template <typename T>
class SharedBlock {
  static_assert(std::is_trivially_destructible_v<T>);

 public:
  static absl::StatusOr<SharedBlock> Create() {
    void* p = mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return absl::ResourceExhaustedError("mmap of a shared block failed");
    return SharedBlock(new (p) T());
  }
  SharedBlock(SharedBlock&& other) noexcept : p_(other.p_) { other.p_ = nullptr; }
  SharedBlock& operator=(SharedBlock&&) = delete;
  SharedBlock(const SharedBlock&) = delete;
  ~SharedBlock() {
    if (p_ != nullptr) munmap(p_, sizeof(T));
  }
  T* get() const { return p_; }
  T* operator->() const { return p_; }

 private:
  explicit SharedBlock(T* p) : p_(p) {}
  T* p_;
};

// Room for a child's error message, in a SharedBlock.
struct ChildError {
  char message[256];
};

// Forks a child that runs `body` and _exits 0 on OK, else 1 after copying the message
// into `*error` (which must live in shared memory). The child dies with the parent
// (PR_SET_PDEATHSIG), so a killed benchmark leaves no reader behind.
absl::StatusOr<pid_t> ForkChild(std::function<absl::Status()> body, ChildError* error);

// Waits for every pid until `deadline`, SIGKILLing the ones still running then. Returns
// OK when all exited 0; otherwise an error naming each failure (with its ChildError
// message; `errors[i]` belongs to `pids[i]`). Clears `pids`.
absl::Status JoinChildren(std::vector<pid_t>& pids, const std::vector<ChildError*>& errors,
                          absl::Time deadline);

// SIGKILLs and reaps every pid; clears `pids`. For error paths.
void KillChildren(std::vector<pid_t>& pids);

}  // namespace zephon::shm::bench

#endif  // ZEPHON_TESTS_BENCH_RING_PROCESSES_H_
