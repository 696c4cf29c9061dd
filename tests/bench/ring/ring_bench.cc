// ring_bench: the shared-memory transport's figures, side by side in one process run:
// zero-copy delivery throughput against memcpy, publish -> wake-up latency, and reader
// CPU per Acquire + Release. See docs/benchmarks.md ("make bench-shm").
//
// Usage: ring_bench [--quick] [--json PATH]
// Readers are real forked processes (as trainers are), each mapping the ring from its own
// descriptors (data read-only), as trainers do; rings are memfds "zephon-bench.<pid>.*",
// freed by the kernel however the run ends.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "tests/bench/ring/bench_util.h"
#include "tests/bench/ring/copy_baseline.h"
#include "tests/bench/ring/latency.h"
#include "tests/bench/ring/processes.h"
#include "tests/bench/ring/reader_cpu.h"
#include "tests/bench/ring/report.h"
#include "tests/bench/ring/throughput.h"
#include "shm/ring_layout.h"

namespace zephon::shm::bench {
namespace {

struct Flags {
  bool quick = false;
  std::string json_path;
};

absl::Status ParseFlags(int argc, char** argv, Flags* flags) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      flags->quick = true;
    } else if (arg == "--json" && i + 1 < argc) {
      flags->json_path = argv[++i];
    } else if (arg.rfind("--json=", 0) == 0) {
      flags->json_path = arg.substr(7);
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown argument '", arg, "'\nusage: ring_bench [--quick] [--json PATH]"));
    }
  }
  // `bazel run` starts us in the runfiles tree; resolve a relative path where the user was.
  const char* cwd = std::getenv("BUILD_WORKING_DIRECTORY");
  if (!flags->json_path.empty() && flags->json_path[0] != '/' && cwd != nullptr) {
    flags->json_path = absl::StrCat(cwd, "/", flags->json_path);
  }
  return absl::OkStatus();
}

absl::Status Run(const Flags& flags, BenchReport* report) {
  const uint64_t start_ns = MonotonicNowNs();
  // Full run: ~1.5 s per throughput config; --quick: ~0.3 s. The batch caps only bind on
  // machines far faster than a 2-core VM.
  const absl::Duration per_config =
      flags.quick ? absl::Milliseconds(300) : absl::Milliseconds(1500);
  const absl::Duration copy_budget =
      flags.quick ? absl::Milliseconds(100) : absl::Milliseconds(300);
  constexpr uint32_t kSlots = 8;  // ring depth for the throughput configs
  for (uint64_t payload : {uint64_t{64} << 10, uint64_t{1} << 20, uint64_t{16} << 20}) {
    // The memcpy baseline is taken right before the ring configs of the same size, so
    // both see the same machine state.
    report->copies.push_back(MeasureCopy(payload, kSlots, copy_budget));
    for (int readers : {1, 2, 4}) {
      ThroughputConfig c;
      c.payload_bytes = payload;
      c.readers = readers;
      c.slot_count = kSlots;
      c.duration = per_config;
      c.max_batches = (flags.quick ? 40ull : 200ull) * (1ull << 30) / payload;
      std::fprintf(stderr, "throughput: %llu KiB x %d readers...\n",
                   static_cast<unsigned long long>(payload >> 10), readers);
      ASSIGN_OR_RETURN(ThroughputResult r, RunThroughput(c));
      report->throughput.push_back(r);
    }
  }
  for (WaitMode mode : {WaitMode::kBlocked, WaitMode::kSpinApi, WaitMode::kSpinRaw}) {
    LatencyConfig c;
    c.mode = mode;
    c.samples = flags.quick ? 400 : 2000;
    c.gap = absl::Microseconds(300);
    std::fprintf(stderr, "latency: %s...\n", std::string(WaitModeName(mode)).c_str());
    ASSIGN_OR_RETURN(LatencyResult r, RunLatency(c));
    report->latency.push_back(r);
  }
  for (ProducerMode mode : {ProducerMode::kIdle, ProducerMode::kKeepsFull}) {
    ReaderCpuConfig c;
    c.mode = mode;
    c.slot_count = 1024;
    c.max_batches = flags.quick ? 16 * 1024 : 64 * 1024;
    c.duration = flags.quick ? absl::Milliseconds(200) : absl::Seconds(1);
    std::fprintf(stderr, "reader cpu: %s...\n", std::string(ProducerModeName(mode)).c_str());
    ASSIGN_OR_RETURN(ReaderCpuResult r, RunReaderCpu(c));
    report->reader_cpu.push_back(r);
  }
  report->wall_seconds = (MonotonicNowNs() - start_ns) / 1e9;
  return absl::OkStatus();
}

}  // namespace
}  // namespace zephon::shm::bench

int main(int argc, char** argv) {
  using namespace zephon::shm::bench;  // NOLINT: main only
  Flags flags;
  if (absl::Status s = ParseFlags(argc, argv, &flags); !s.ok()) {
    std::fprintf(stderr, "%s\n", std::string(s.message()).c_str());
    return 2;
  }
  BenchReport report;
  report.machine = DescribeMachine(argc, argv);
  report.quick = flags.quick;
  const absl::Status status = Run(flags, &report);
  // Rings are memfds: nothing can be left in /dev/shm, whatever failed.
  if (!status.ok()) {
    std::fprintf(stderr, "ring_bench failed: %s\n", status.ToString().c_str());
    return 1;
  }
  PrintReport(report, stdout);
  if (!flags.json_path.empty()) {
    if (absl::Status s = WriteJson(report, flags.json_path); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
    std::fprintf(stderr, "wrote %s\n", flags.json_path.c_str());
  }
  return 0;
}
