// File: tests/bench/ring/latency.h
//
// Hand-off latency, publish -> reader wake-up, with one forked reader. The producer
// paces publishes `gap` apart, stores CLOCK_MONOTONIC in the slot right before Publish,
// and the reader takes now - stamp right after Acquire returns. Three reader modes:
//   kBlocked  Acquire with a long timeout: after its short spin the reader parks in
//             FUTEX_WAIT, so each batch costs a futex wake-up (the normal trainer path).
//   kSpinApi  busy-poll through the public API: Acquire(zero timeout) in a loop. The
//             reader never sleeps; each miss costs Acquire's 256-pause spin and a
//             DEADLINE_EXCEEDED status.
//   kSpinRaw  busy-poll on the header's `published` cursor, read-only, through a second
//             mapping made by the benchmark (shm/ is unchanged), then Acquire, which then
//             returns at once. The floor: a cache-line transfer plus Acquire's own cost.
#ifndef ZEPHON_TESTS_BENCH_RING_LATENCY_H_
#define ZEPHON_TESTS_BENCH_RING_LATENCY_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "tests/bench/ring/bench_util.h"

namespace zephon::shm::bench {

enum class WaitMode { kBlocked, kSpinApi, kSpinRaw };

absl::string_view WaitModeName(WaitMode mode);

struct LatencyConfig {
  WaitMode mode = WaitMode::kBlocked;
  int samples = 2000;  // after a warm-up of one lap of the ring
  absl::Duration gap = absl::Microseconds(300);
};

struct LatencyResult {
  LatencyConfig config;
  LatencyStats handoff;                     // publish stamp -> Acquire returned, in the reader
  LatencyStats publish_call;                // duration of the RingWriter::Publish call itself
  double voluntary_switches_per_batch = 0;  // ~1 when the reader parks for every batch
  double empty_polls_per_batch = 0;         // kSpinApi: DEADLINE_EXCEEDED returns per batch
};

absl::StatusOr<LatencyResult> RunLatency(const LatencyConfig& config);

}  // namespace zephon::shm::bench

#endif  // ZEPHON_TESTS_BENCH_RING_LATENCY_H_
