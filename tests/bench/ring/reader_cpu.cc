#include "tests/bench/ring/reader_cpu.h"

#include <atomic>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "tests/bench/ring/bench_ring.h"
#include "tests/bench/ring/bench_util.h"
#include "shm/ring_layout.h"

namespace zephon::shm::bench {
namespace {

// Control words and results shared by the producer (this process) and the reader.
struct Control {
  std::atomic<uint64_t> publish_limit;  // kIdle: the producer publishes seqs below this
  std::atomic<uint32_t> stop;           // the reader is done measuring
  uint64_t batches;
  uint64_t cpu_ns;
  uint64_t wall_ns;
  uint64_t wakes;
};

absl::Status MeasureWindows(RingReader& reader, const ReaderCpuConfig& c,
                            Control* ctl) {
  const auto* header = reinterpret_cast<const RingHeader*>(reader.mapping());
  const uint64_t budget_ns = absl::ToInt64Nanoseconds(c.duration);
  // One unmeasured lap first: faults in the slots and warms the allocator.
  for (bool warm = true; ctl->batches < c.max_batches && ctl->wall_ns < budget_ns; warm = false) {
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (header->published.load(std::memory_order_acquire) < reader.next_seq() + c.slot_count) {
      if (absl::Now() > deadline) return absl::DeadlineExceededError("ring never filled");
      absl::SleepFor(absl::Microseconds(50));
    }
    const uint32_t wakes0 = reader.release_wakes();
    const uint64_t wall0 = MonotonicNowNs();
    const uint64_t cpu0 = ThreadCpuNs();
    for (uint32_t i = 0; i < c.slot_count; ++i) {
      // Zero timeout: the batch is already published, so Acquire must not wait; if it
      // ever did, the figure would be wrong and the run fails instead.
      absl::StatusOr<SlotView> view = reader.Acquire(absl::ZeroDuration());
      if (!view.ok()) return view.status();
      RETURN_IF_ERROR(reader.Release(view->seq));
    }
    const uint64_t cpu1 = ThreadCpuNs();
    const uint64_t wall1 = MonotonicNowNs();
    const uint32_t wakes1 = reader.release_wakes();
    if (!warm) {
      ctl->batches += c.slot_count;
      ctl->cpu_ns += cpu1 - cpu0;
      ctl->wall_ns += wall1 - wall0;
      ctl->wakes += uint32_t(wakes1 - wakes0);
    }
    ctl->publish_limit.fetch_add(c.slot_count, std::memory_order_release);
  }
  ctl->stop.store(1, std::memory_order_release);
  for (;;) {  // drain to end-of-stream so the producer can finish
    absl::StatusOr<SlotView> view = reader.Acquire(absl::Seconds(30));
    if (absl::IsOutOfRange(view.status())) return absl::OkStatus();
    if (!view.ok()) return view.status();
    RETURN_IF_ERROR(reader.Release(view->seq));
  }
}

absl::Status Produce(RingWriter& writer, const ReaderCpuConfig& c, Control* ctl) {
  for (;;) {
    if (ctl->stop.load(std::memory_order_acquire) != 0) break;
    if (c.mode == ProducerMode::kIdle &&
        writer.published() >= ctl->publish_limit.load(std::memory_order_acquire)) {
      absl::SleepFor(absl::Microseconds(100));  // stay off the CPU during a window
      continue;
    }
    // A short loan timeout: a kKeepsFull producer is blocked here when the reader stops,
    // and must notice `stop` to publish end-of-stream.
    absl::StatusOr<SlotWriter> slot = writer.Loan(absl::Milliseconds(200));
    if (absl::IsDeadlineExceeded(slot.status())) continue;
    if (!slot.ok()) return slot.status();
    ASSIGN_OR_RETURN(void* meta, slot->AddTensor("meta", DType::kUInt64, {2}));
    static_cast<uint64_t*>(meta)[0] = slot->seq();
    RETURN_IF_ERROR(writer.Publish(*std::move(slot)));
  }
  return writer.PublishEndOfStream(absl::Seconds(30));
}

}  // namespace

absl::string_view ProducerModeName(ProducerMode mode) {
  return mode == ProducerMode::kIdle ? "producer idle during window" : "producer keeps ring full";
}

absl::StatusOr<ReaderCpuResult> RunReaderCpu(const ReaderCpuConfig& c) {
  ASSIGN_OR_RETURN(SharedBlock<Control> control, SharedBlock<Control>::Create());
  Control* ctl = control.get();
  ctl->publish_limit.store(c.slot_count);
  ASSIGN_OR_RETURN(std::unique_ptr<BenchRing> ring,
                   BenchRing::Start(c.mode == ProducerMode::kIdle ? "cpu-idle" : "cpu-full",
                                    RingGeometry{c.slot_count, 64, 1}, 1,
                                    [=](RingReader& reader, int) {
                                      return MeasureWindows(reader, c, ctl);
                                    }));
  RETURN_IF_ERROR(Produce(ring->writer(), c, ctl));
  RETURN_IF_ERROR(ring->Join(absl::Seconds(60)));
  if (ctl->batches == 0) return absl::FailedPreconditionError("no batches measured");
  ReaderCpuResult r;
  r.config = c;
  r.batches = ctl->batches;
  r.cpu_ns_per_batch = double(ctl->cpu_ns) / ctl->batches;
  r.wall_ns_per_batch = double(ctl->wall_ns) / ctl->batches;
  r.wakes_per_release = double(ctl->wakes) / ctl->batches;
  return r;
}

}  // namespace zephon::shm::bench
