// File: tests/bench/ring/bench_ring.h
//
// BenchRing: one RingWriter (the producer, in this process, as zephond) plus N forked
// reader processes, each opening its own RingReader (its own mapping, as a trainer
// would). Leases are attached before the fork and inherited, standing in for zephond's
// Attach RPC, and each reader's ring fds (data read-only) are made before its fork and
// inherited, standing in for the hand-off socket; the producer starts only once every reader has opened the ring.
//
// Thread safety: single-owner; use from the main thread. Destroying a BenchRing SIGKILLs
// readers not yet joined, then the writer closes the ring, so every error path cleans up.
#ifndef ZEPHON_TESTS_BENCH_RING_BENCH_RING_H_
#define ZEPHON_TESTS_BENCH_RING_BENCH_RING_H_

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tests/bench/ring/processes.h"
#include "shm/ring_reader.h"
#include "shm/ring_writer.h"

namespace zephon::shm::bench {

inline constexpr int kMaxBenchReaders = 8;

// How long a reader tolerates a silent producer before Acquire reports UNAVAILABLE: the
// producer heartbeats on every Publish, so this only fires if the benchmark is wedged.
inline constexpr absl::Duration kProducerTimeout = absl::Seconds(10);

class BenchRing {
 public:
  // Runs in reader process `index` (0-based) after its RingReader is open; a body may
  // watch the header through reader.mapping() (read-only).
  using ReaderBody = std::function<absl::Status(RingReader& reader, int index)>;

  // Creates the ring (memfds "zephon-bench.<pid>.<tag>.<n>") and starts `readers` processes
  // (1..kMaxBenchReaders). Returns once all of them have opened the ring.
  static absl::StatusOr<std::unique_ptr<BenchRing>> Start(absl::string_view tag,
                                                          const RingGeometry& geometry, int readers,
                                                          ReaderBody body);
  ~BenchRing();
  BenchRing(const BenchRing&) = delete;
  BenchRing& operator=(const BenchRing&) = delete;

  RingWriter& writer() { return *writer_; }
  const std::string& name() const { return writer_->name(); }

  // Waits for every reader to exit within `timeout`; errors carry the readers' messages.
  absl::Status Join(absl::Duration timeout);

 private:
  struct Board {
    std::atomic<int> ready;
    ChildError errors[kMaxBenchReaders];
  };
  BenchRing(std::unique_ptr<RingWriter> writer, SharedBlock<Board> board)
      : writer_(std::move(writer)), board_(std::move(board)) {}

  std::unique_ptr<RingWriter> writer_;
  SharedBlock<Board> board_;
  std::vector<pid_t> pids_;
};

}  // namespace zephon::shm::bench

#endif  // ZEPHON_TESTS_BENCH_RING_BENCH_RING_H_
