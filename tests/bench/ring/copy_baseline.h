// File: tests/bench/ring/copy_baseline.h
//
// What a copying transport would cost a reader, measured in the same run as the ring.
// Single-threaded, in this process, on page-aligned heap buffers filled beforehand.
//
// Two kinds of figures, because they answer different questions:
//   * "hot": one buffer copied into another, repeated. Source and destination stay in
//     the CPU caches up to a few MiB, so this is the best case for copying.
//   * "over the ring's working set": the source rotates over `sources` buffers, like a
//     reader walking the ring's slots (slot_count x payload bytes), so it is as cold in
//     cache as the ring's slots are. This is what a copying transport would really pay,
//     and the touch-only figure is the ceiling for zero-copy delivery (a zero-copy reader
//     does exactly that touch plus the transport's bookkeeping).
#ifndef ZEPHON_TESTS_BENCH_RING_COPY_BASELINE_H_
#define ZEPHON_TESTS_BENCH_RING_COPY_BASELINE_H_

#include <cstdint>

#include "absl/time/time.h"

namespace zephon::shm::bench {

struct CopyBaseline {
  uint64_t bytes = 0;
  uint32_t sources = 0;
  // Hot (one source buffer), 1e9 bytes per second.
  double memcpy_gbps = 0;        // copied
  double memcpy_touch_gbps = 0;  // copied, then summed (SumWords) from the copy
  // Source rotating over `sources` buffers.
  double ring_memcpy_touch_gbps = 0;  // copied, then summed
  double ring_touch_gbps = 0;         // summed in place: the zero-copy ceiling
};

// Spends about `budget` on each of the four measurements (at least 8 repetitions each).
CopyBaseline MeasureCopy(uint64_t bytes, uint32_t sources, absl::Duration budget);

}  // namespace zephon::shm::bench

#endif  // ZEPHON_TESTS_BENCH_RING_COPY_BASELINE_H_
