// File: tests/bench/ring/reader_cpu.h
//
// Reader CPU time per batch for Acquire + Release alone (no data touched), in a reader
// that never waits: before each measured window the ring is full (published == next +
// slot_count, watched read-only through a second mapping), and the window consumes at
// most slot_count batches, all already published. CLOCK_THREAD_CPUTIME_ID is read once
// per window, so the clock's own cost is spread over slot_count batches.
//   kIdle       the producer refills only between windows: nothing else runs during one.
//   kKeepsFull  the producer keeps publishing during the window; it is asleep in Loan
//               whenever the ring is full, so Release usually has to FUTEX_WAKE it.
#ifndef ZEPHON_TESTS_BENCH_RING_READER_CPU_H_
#define ZEPHON_TESTS_BENCH_RING_READER_CPU_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace zephon::shm::bench {

enum class ProducerMode { kIdle, kKeepsFull };

absl::string_view ProducerModeName(ProducerMode mode);

struct ReaderCpuConfig {
  ProducerMode mode = ProducerMode::kKeepsFull;
  uint32_t slot_count = 1024;  // batches per measured window
  uint64_t max_batches = 65536;
  absl::Duration duration = absl::Seconds(1);  // measured time, whichever comes first
};

struct ReaderCpuResult {
  ReaderCpuConfig config;
  uint64_t batches = 0;
  double cpu_ns_per_batch = 0;   // thread CPU time in Acquire + Release
  double wall_ns_per_batch = 0;  // CLOCK_MONOTONIC over the same windows
  double wakes_per_release = 0;  // releases that bumped release_wake (woke the producer)
};

absl::StatusOr<ReaderCpuResult> RunReaderCpu(const ReaderCpuConfig& config);

}  // namespace zephon::shm::bench

#endif  // ZEPHON_TESTS_BENCH_RING_READER_CPU_H_
