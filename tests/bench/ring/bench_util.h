// File: tests/bench/ring/bench_util.h
//
// Small, dependency-free helpers for the ring benchmark: the machine description that
// heads every report, clocks, latency summaries, and the "trainer touch" (sum every
// 64-bit word) that both the zero-copy readers and the memcpy baseline pay.
// Thread safety: all functions are thread-safe (pure or read-only of /proc).
#ifndef ZEPHON_TESTS_BENCH_RING_BENCH_UTIL_H_
#define ZEPHON_TESTS_BENCH_RING_BENCH_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

namespace zephon::shm::bench {

// What the figures were measured on; printed first so a pasted table carries it.
struct MachineInfo {
  int nproc = 0;          // online CPUs
  std::string cpu_model;  // /proc/cpuinfo "model name" of the first CPU
  std::string kernel;     // uname -sr
  uint64_t mem_total_kib = 0;
  std::string date_utc;  // ISO 8601, when the run started
  std::string command;   // argv joined, plus how it was invoked (bazel run or not)
};

MachineInfo DescribeMachine(int argc, char** argv);

// CPU time consumed by the calling thread (CLOCK_THREAD_CPUTIME_ID), in ns.
uint64_t ThreadCpuNs();

struct LatencyStats {
  uint64_t count = 0;
  uint64_t p50_ns = 0;
  uint64_t p99_ns = 0;
  uint64_t max_ns = 0;
  double mean_ns = 0;
};

// Nearest-rank percentiles (p99 of 100 samples is the 99th smallest). Empty input gives
// all zeros.
LatencyStats Summarize(std::vector<uint64_t> samples_ns);

// The reader's touch: the wrapping sum of every 64-bit word, so every byte is loaded once
// (as a trainer's first pass over a batch would). Vectorised the way numpy/torch would be
// rather than a one-word-per-cycle scalar loop, so the touch does not hide the transport.
// REQUIRES: `data` is 8-byte aligned; a tail shorter than 8 bytes is ignored.
uint64_t SumWords(const void* data, uint64_t bytes);

// Fills `bytes` with a deterministic pattern (word i = mix(i)) so pages are real and the
// readers' sums can be checked.
void FillPattern(void* data, uint64_t bytes);

}  // namespace zephon::shm::bench

#endif  // ZEPHON_TESTS_BENCH_RING_BENCH_UTIL_H_
