#include "tests/bench/ring/copy_baseline.h"

#include <cstdlib>
#include <cstring>

#include "tests/bench/ring/bench_util.h"
#include "shm/ring_layout.h"

namespace zephon::shm::bench {
namespace {

// Keeps the compiler from proving the copy dead.
inline void Clobber(void* p) { asm volatile("" : : "r"(p) : "memory"); }

// Repeats `op` until `budget` has passed (and at least 8 times); returns GB/s.
template <typename Op>
double Rate(uint64_t bytes, absl::Duration budget, Op op) {
  op();  // warm: first-touch faults and cache state are not what we measure
  const uint64_t budget_ns = absl::ToInt64Nanoseconds(budget);
  const uint64_t start = MonotonicNowNs();
  uint64_t reps = 0, now = start;
  while (reps < 8 || now - start < budget_ns) {
    op();
    ++reps;
    now = MonotonicNowNs();
  }
  return double(bytes) * reps / double(now - start);  // bytes per ns == GB/s
}

}  // namespace

CopyBaseline MeasureCopy(uint64_t bytes, uint32_t sources, absl::Duration budget) {
  // Page-aligned like ring slots, and filled so every page is real before timing.
  auto* src = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes * sources));
  auto* dst = static_cast<uint8_t*>(std::aligned_alloc(4096, bytes));
  for (uint32_t i = 0; i < sources; ++i) FillPattern(src + i * bytes, bytes);
  std::memset(dst, 0, bytes);
  CopyBaseline r;
  r.bytes = bytes;
  r.sources = sources;
  volatile uint64_t sink = 0;
  r.memcpy_gbps = Rate(bytes, budget, [&] {
    std::memcpy(dst, src, bytes);
    Clobber(dst);
  });
  r.memcpy_touch_gbps = Rate(bytes, budget, [&] {
    std::memcpy(dst, src, bytes);
    sink = sink + SumWords(dst, bytes);
  });
  uint32_t next = 0;
  auto rotate = [&] {
    const uint8_t* from = src + uint64_t{next} * bytes;
    next = (next + 1) % sources;
    return from;
  };
  r.ring_memcpy_touch_gbps = Rate(bytes, budget, [&] {
    std::memcpy(dst, rotate(), bytes);
    sink = sink + SumWords(dst, bytes);
  });
  r.ring_touch_gbps = Rate(bytes, budget, [&] { sink = sink + SumWords(rotate(), bytes); });
  std::free(src);
  std::free(dst);
  return r;
}

}  // namespace zephon::shm::bench
