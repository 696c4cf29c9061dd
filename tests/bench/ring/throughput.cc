#include "tests/bench/ring/throughput.h"

#include <sys/resource.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tests/bench/ring/bench_ring.h"
#include "tests/bench/ring/bench_util.h"
#include "shm/ring_layout.h"

namespace zephon::shm::bench {
namespace {

// Per-reader results, written by the reader process, read after Join.
struct ReaderTally {
  uint64_t batches;   // timed batches
  uint64_t first_ns;  // CLOCK_MONOTONIC when the warm-up ended
  uint64_t last_ns;   // after the last release
  uint64_t mismatches;
  uint64_t voluntary_switches;  // during the timed batches
};
struct Tallies {
  ReaderTally readers[kMaxBenchReaders];
};

long VoluntarySwitches() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_nvcsw;
}

absl::Status ReadAll(RingReader& reader, uint64_t warmup, uint64_t expected_sum,
                     ReaderTally* tally) {
  volatile uint64_t sink = 0;
  long switches_at_start = 0;
  for (;;) {
    absl::StatusOr<SlotView> view = reader.Acquire(absl::Seconds(30));
    if (absl::IsOutOfRange(view.status())) break;  // end of stream
    if (!view.ok()) return view.status();
    if (view->tensors.size() != 2) return absl::DataLossError("expected meta + data");
    const TensorView& data = view->tensors[1];
    const uint64_t sum = SumWords(data.data, data.bytes);
    sink = sink + sum;
    if (sum != expected_sum) ++tally->mismatches;
    RETURN_IF_ERROR(reader.Release(view->seq));
    // Warm-up: the first laps fault this process's mapping of every slot in.
    if (view->seq + 1 == warmup) {
      tally->first_ns = MonotonicNowNs();
      switches_at_start = VoluntarySwitches();
    } else if (view->seq + 1 > warmup) {
      ++tally->batches;
      tally->last_ns = MonotonicNowNs();
    }
  }
  tally->voluntary_switches = VoluntarySwitches() - switches_at_start;
  return absl::OkStatus();
}

// The producer: loan, write the tensor table and meta, publish; fill payloads on the
// first lap only.
absl::Status Produce(RingWriter& writer, const ThroughputConfig& c) {
  const uint64_t start = MonotonicNowNs();
  const uint64_t budget_ns = absl::ToInt64Nanoseconds(c.duration);
  for (uint64_t n = 0; n < c.max_batches; ++n) {
    ASSIGN_OR_RETURN(SlotWriter slot, writer.Loan(absl::Seconds(30)));
    ASSIGN_OR_RETURN(void* meta, slot.AddTensor("meta", DType::kUInt64, {2}));
    ASSIGN_OR_RETURN(void* data, slot.AddTensor("data", DType::kUInt8, {c.payload_bytes}));
    if (slot.seq() < c.slot_count) FillPattern(data, c.payload_bytes);
    static_cast<uint64_t*>(meta)[0] = slot.seq();
    static_cast<uint64_t*>(meta)[1] = MonotonicNowNs();
    RETURN_IF_ERROR(writer.Publish(std::move(slot)));
    if (MonotonicNowNs() - start >= budget_ns) break;
  }
  return writer.PublishEndOfStream(absl::Seconds(30));
}

}  // namespace

absl::StatusOr<ThroughputResult> RunThroughput(const ThroughputConfig& c) {
  if (c.payload_bytes % 64 != 0) return absl::InvalidArgumentError("payload % 64 != 0");
  std::vector<uint8_t> reference(c.payload_bytes);
  FillPattern(reference.data(), reference.size());
  const uint64_t expected_sum = SumWords(reference.data(), reference.size());
  reference = {};
  const uint64_t warmup = 2ull * c.slot_count;

  ASSIGN_OR_RETURN(SharedBlock<Tallies> tallies, SharedBlock<Tallies>::Create());
  Tallies* t = tallies.get();
  // The meta tensor (16 B) takes the first 64-byte-aligned block after the table.
  const RingGeometry geometry{c.slot_count, c.payload_bytes + kTensorAlignment,
                              static_cast<uint32_t>(c.readers)};
  ASSIGN_OR_RETURN(
      std::unique_ptr<BenchRing> ring,
      BenchRing::Start(absl::StrCat("tp", c.payload_bytes, "x", c.readers), geometry, c.readers,
                       [=](RingReader& reader, int index) {
                         return ReadAll(reader, warmup, expected_sum, &t->readers[index]);
                       }));
  // The release_wake word counts releases that woke a sleeping producer.
  const uint32_t wakes_before = ring->writer().release_wakes();
  RETURN_IF_ERROR(Produce(ring->writer(), c));
  RETURN_IF_ERROR(ring->Join(absl::Seconds(60)));
  const uint32_t wakes = ring->writer().release_wakes() - wakes_before;
  const uint64_t releases = ring->writer().published() * c.readers;

  ThroughputResult r;
  r.config = c;
  r.min_reader_gbps = 1e300;
  uint64_t first = ~0ull, last = 0, total_bytes = 0, switches = 0;
  for (int i = 0; i < c.readers; ++i) {
    const ReaderTally& rt = t->readers[i];
    if (rt.batches == 0 || rt.last_ns <= rt.first_ns) {
      return absl::FailedPreconditionError(absl::StrCat("reader ", i, " timed no batches past the ",
                                                        warmup, "-batch warm-up; run longer"));
    }
    const double seconds = (rt.last_ns - rt.first_ns) / 1e9;
    const double gbps = rt.batches * double(c.payload_bytes) / seconds / 1e9;
    r.batches_per_reader += rt.batches;
    r.batches_per_s += rt.batches / seconds;
    r.reader_gbps += gbps;
    r.min_reader_gbps = std::min(r.min_reader_gbps, gbps);
    r.sum_mismatches += rt.mismatches;
    first = std::min(first, rt.first_ns);
    last = std::max(last, rt.last_ns);
    total_bytes += rt.batches * c.payload_bytes;
    switches += rt.voluntary_switches;
  }
  r.batches_per_reader /= c.readers;
  r.batches_per_s /= c.readers;
  r.reader_gbps /= c.readers;
  r.aggregate_gbps = double(total_bytes) / double(last - first);
  r.reader_parks_per_batch = double(switches) / (total_bytes / c.payload_bytes);
  r.producer_wakes_per_release = double(wakes) / releases;
  return r;
}

}  // namespace zephon::shm::bench
