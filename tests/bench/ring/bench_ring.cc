#include "tests/bench/ring/bench_ring.h"

#include <sys/wait.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace zephon::shm::bench {

absl::StatusOr<std::unique_ptr<BenchRing>> BenchRing::Start(absl::string_view tag,
                                                            const RingGeometry& geometry,
                                                            int readers, ReaderBody body) {
  if (readers < 1 || readers > kMaxBenchReaders) {
    return absl::InvalidArgumentError(absl::StrCat("readers must be 1..", kMaxBenchReaders));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<RingWriter> writer,
                   RingWriter::Create(BenchShmName(tag), geometry, "ring_bench"));
  ASSIGN_OR_RETURN(SharedBlock<Board> board, SharedBlock<Board>::Create());
  std::unique_ptr<BenchRing> ring(new BenchRing(std::move(writer), std::move(board)));
  const std::string name = ring->name();
  const uint64_t generation = ring->writer_->generation();
  for (int i = 0; i < readers; ++i) {
    ASSIGN_OR_RETURN(ReaderLease lease, ring->writer_->AttachReader(i, 0, 0, std::nullopt));
    Board* b = ring->board_.get();
    ASSIGN_OR_RETURN(RingFds ring_fds, ring->writer_->ReaderFds());
    auto fds = std::make_shared<RingFds>(std::move(ring_fds));
    auto child = [=]() -> absl::Status {
      ASSIGN_OR_RETURN(std::unique_ptr<RingReader> reader,
                       RingReader::Open(std::move(*fds), name, lease.index, lease.lease_epoch,
                                        generation, kProducerTimeout));
      b->ready.fetch_add(1, std::memory_order_release);
      return body(*reader, i);
    };
    ASSIGN_OR_RETURN(pid_t pid, ForkChild(child, &b->errors[i]));
    ring->pids_.push_back(pid);
  }
  // Wait for every reader to open the ring; a reader that fails to opens exits early.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (ring->board_->ready.load(std::memory_order_acquire) < readers) {
    for (size_t i = 0; i < ring->pids_.size(); ++i) {
      int status;
      if (waitpid(ring->pids_[i], &status, WNOHANG) == ring->pids_[i]) {
        ring->pids_.erase(ring->pids_.begin() + i);
        return absl::InternalError(absl::StrCat(
            "reader ", i, " exited before starting: ", ring->board_->errors[i].message));
      }
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("reader processes did not open the ring in 10 s");
    }
    absl::SleepFor(absl::Microseconds(200));
  }
  return ring;
}

BenchRing::~BenchRing() { KillChildren(pids_); }  // then writer_ closes the ring

absl::Status BenchRing::Join(absl::Duration timeout) {
  std::vector<ChildError*> errors;
  for (int i = 0; i < kMaxBenchReaders; ++i) errors.push_back(&board_->errors[i]);
  return JoinChildren(pids_, errors, absl::Now() + timeout);
}

}  // namespace zephon::shm::bench
