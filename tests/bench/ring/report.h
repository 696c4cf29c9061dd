// File: tests/bench/ring/report.h
//
// Everything one ring_bench run measured, printed as Markdown tables (so the output can
// be pasted into docs/benchmarks.md as is) with each target marked met or missed, and
// optionally written as JSON.
#ifndef ZEPHON_TESTS_BENCH_RING_REPORT_H_
#define ZEPHON_TESTS_BENCH_RING_REPORT_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/bench/ring/bench_util.h"
#include "tests/bench/ring/copy_baseline.h"
#include "tests/bench/ring/latency.h"
#include "tests/bench/ring/reader_cpu.h"
#include "tests/bench/ring/throughput.h"

namespace zephon::shm::bench {

// Targets from the "Shared-memory transport" issue.
inline constexpr uint64_t kDeliveryTargetMinBytes = 1 << 20;  // delivered >= memcpy from here
inline constexpr double kBlockedP50TargetUs = 20;
inline constexpr double kReaderCpuTargetUs = 5;

struct BenchReport {
  MachineInfo machine;
  bool quick = false;
  std::vector<CopyBaseline> copies;  // one per payload size
  std::vector<ThroughputResult> throughput;
  std::vector<LatencyResult> latency;
  std::vector<ReaderCpuResult> reader_cpu;
  double wall_seconds = 0;
};

void PrintReport(const BenchReport& report, std::FILE* out);

absl::Status WriteJson(const BenchReport& report, const std::string& path);

}  // namespace zephon::shm::bench

#endif  // ZEPHON_TESTS_BENCH_RING_REPORT_H_
