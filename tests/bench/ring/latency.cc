#include "tests/bench/ring/latency.h"

#include <sys/resource.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "tests/bench/ring/bench_ring.h"
#include "shm/futex.h"
#include "shm/ring_layout.h"

namespace zephon::shm::bench {
namespace {

constexpr uint32_t kSlots = 8;
constexpr uint64_t kWarmup = kSlots;
constexpr int kMaxSamples = 100000;

struct Outcome {
  LatencyStats handoff;
  uint64_t voluntary_switches;
  uint64_t empty_polls;
  uint64_t batches;
};

long VoluntarySwitches() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nvcsw;
}

// Acquires the next batch the way `mode` says; counts kSpinApi's empty polls.
absl::StatusOr<SlotView> Next(RingReader& reader, WaitMode mode, const RingHeader* header,
                              uint64_t* empty_polls) {
  switch (mode) {
    case WaitMode::kBlocked:
      return reader.Acquire(absl::Seconds(30));
    case WaitMode::kSpinApi:
      for (;;) {
        absl::StatusOr<SlotView> view = reader.Acquire(absl::ZeroDuration());
        if (!absl::IsDeadlineExceeded(view.status())) return view;
        ++*empty_polls;
      }
    case WaitMode::kSpinRaw: {
      const absl::Time deadline = absl::Now() + absl::Seconds(30);
      // `published` only grows; end-of-stream is itself a published slot.
      while (header->published.load(std::memory_order_acquire) <= reader.next_seq()) {
        CpuRelax();
        if ((++*empty_polls & 0xFFFFF) == 0 && absl::Now() > deadline) {
          return absl::DeadlineExceededError("nothing published for 30 s");
        }
      }
      return reader.Acquire(absl::ZeroDuration());
    }
  }
  return absl::InternalError("unknown mode");
}

absl::Status Receive(RingReader& reader, WaitMode mode, Outcome* out) {
  // kSpinRaw's read-only view of the header: its own mapping, so the RingReader's
  // validated copy of the geometry is untouched.
  const auto* header = reinterpret_cast<const RingHeader*>(reader.mapping());
  std::vector<uint64_t> samples;
  samples.reserve(kMaxSamples);
  uint64_t polls = 0;
  long switches_at_start = 0;
  for (;;) {
    absl::StatusOr<SlotView> view = Next(reader, mode, header, &polls);
    const uint64_t now = MonotonicNowNs();  // first thing after Acquire returns
    if (absl::IsOutOfRange(view.status())) break;
    if (!view.ok()) return view.status();
    const uint64_t stamp = *static_cast<const uint64_t*>(view->tensors[0].data);
    if (view->seq >= kWarmup && samples.size() < kMaxSamples) {
      samples.push_back(now - stamp);
    }
    RETURN_IF_ERROR(reader.Release(view->seq));
    if (view->seq + 1 == kWarmup) {  // count only the timed batches
      switches_at_start = VoluntarySwitches();
      polls = 0;
    }
  }
  out->batches = samples.size();
  out->voluntary_switches = VoluntarySwitches() - switches_at_start;
  out->empty_polls = polls;
  out->handoff = Summarize(std::move(samples));
  return absl::OkStatus();
}

}  // namespace

absl::string_view WaitModeName(WaitMode mode) {
  switch (mode) {
    case WaitMode::kBlocked:
      return "blocked (futex)";
    case WaitMode::kSpinApi:
      return "spinning: Acquire(0) loop";
    case WaitMode::kSpinRaw:
      return "spinning: raw cursor poll";
  }
  return "?";
}

absl::StatusOr<LatencyResult> RunLatency(const LatencyConfig& c) {
  if (c.samples < 1 || c.samples > kMaxSamples) {
    return absl::InvalidArgumentError(absl::StrCat("samples must be 1..", kMaxSamples));
  }
  ASSIGN_OR_RETURN(SharedBlock<Outcome> outcome, SharedBlock<Outcome>::Create());
  Outcome* out = outcome.get();
  const std::string tag = c.mode == WaitMode::kBlocked
                              ? "lat-blocked"
                              : (c.mode == WaitMode::kSpinApi ? "lat-spinapi" : "lat-spinraw");
  ASSIGN_OR_RETURN(std::unique_ptr<BenchRing> ring,
                   BenchRing::Start(tag, RingGeometry{kSlots, 4096, 1}, 1,
                                    [=](RingReader& reader, int) {
                                      return Receive(reader, c.mode, out);
                                    }));

  RingWriter& writer = ring->writer();
  std::vector<uint64_t> publish_ns;
  publish_ns.reserve(c.samples + kWarmup);
  for (uint64_t i = 0; i < c.samples + kWarmup; ++i) {
    absl::SleepFor(c.gap);  // long enough for a blocked reader to be parked again
    ASSIGN_OR_RETURN(SlotWriter slot, writer.Loan(absl::Seconds(30)));
    ASSIGN_OR_RETURN(void* stamp, slot.AddTensor("stamp", DType::kUInt64, {1}));
    const uint64_t before = MonotonicNowNs();
    *static_cast<uint64_t*>(stamp) = before;
    RETURN_IF_ERROR(writer.Publish(std::move(slot)));
    if (i >= kWarmup) publish_ns.push_back(MonotonicNowNs() - before);
  }
  RETURN_IF_ERROR(writer.PublishEndOfStream(absl::Seconds(30)));
  RETURN_IF_ERROR(ring->Join(absl::Seconds(60)));

  LatencyResult r;
  r.config = c;
  r.handoff = out->handoff;
  r.publish_call = Summarize(std::move(publish_ns));
  if (out->batches > 0) {
    r.voluntary_switches_per_batch = double(out->voluntary_switches) / out->batches;
    r.empty_polls_per_batch =
        c.mode == WaitMode::kSpinApi ? double(out->empty_polls) / out->batches : 0;
  }
  return r;
}

}  // namespace zephon::shm::bench
