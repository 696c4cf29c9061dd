#include "tests/bench/ring/bench_util.h"

#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/mix.h"

namespace zephon::shm::bench {
namespace {

// Value of the first "key : value" line of a /proc file whose key is `key`, or "".
std::string ProcField(const char* path, absl::string_view key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, key)) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

}  // namespace

MachineInfo DescribeMachine(int argc, char** argv) {
  MachineInfo m;
  m.nproc = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  m.cpu_model = ProcField("/proc/cpuinfo", "model name");
  if (m.cpu_model.empty()) m.cpu_model = "unknown";
  utsname u{};
  if (uname(&u) == 0) m.kernel = absl::StrCat(u.sysname, " ", u.release, " ", u.machine);
  const std::string mem = ProcField("/proc/meminfo", "MemTotal");
  m.mem_total_kib = std::strtoull(mem.c_str(), nullptr, 10);
  m.date_utc = absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::Now(), absl::UTCTimeZone());
  std::vector<std::string> args(argv, argv + argc);
  m.command = absl::StrJoin(args, " ");
  // `bazel run` sets these; saying so tells a reader how to reproduce the run.
  if (const char* ws = std::getenv("BUILD_WORKSPACE_DIRECTORY"); ws != nullptr) {
    m.command =
        absl::StrCat("bazel run //tests/bench/ring:ring_bench -- ",
                     absl::StrJoin(args.begin() + 1, args.end(), " "), " (workspace ", ws, ")");
  }
  return m;
}

uint64_t ThreadCpuNs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

LatencyStats Summarize(std::vector<uint64_t> samples_ns) {
  LatencyStats s;
  if (samples_ns.empty()) return s;
  std::sort(samples_ns.begin(), samples_ns.end());
  const size_t n = samples_ns.size();
  auto rank = [&](double p) {  // nearest rank: ceil(p * n), 1-based
    size_t r = static_cast<size_t>(p * n);
    if (r < p * n) ++r;
    return samples_ns[std::clamp<size_t>(r, 1, n) - 1];
  };
  s.count = n;
  s.p50_ns = rank(0.50);
  s.p99_ns = rank(0.99);
  s.max_ns = samples_ns.back();
  s.mean_ns = std::accumulate(samples_ns.begin(), samples_ns.end(), 0.0) / n;
  return s;
}

uint64_t SumWords(const void* data, uint64_t bytes) {
  // Four independent 2x64-bit accumulators: 64 bytes per iteration with SSE2 paddq,
  // enough to be limited by the memory system rather than by the add chain.
  typedef uint64_t V2 __attribute__((vector_size(16)));
  const auto* p = static_cast<const uint8_t*>(data);
  V2 a = {0, 0}, b = {0, 0}, c = {0, 0}, d = {0, 0};
  uint64_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    V2 w, x, y, z;
    std::memcpy(&w, p + i, 16);  // memcpy: aliasing-safe; compiles to one load
    std::memcpy(&x, p + i + 16, 16);
    std::memcpy(&y, p + i + 32, 16);
    std::memcpy(&z, p + i + 48, 16);
    a += w;
    b += x;
    c += y;
    d += z;
  }
  const V2 t = a + b + c + d;
  uint64_t sum = t[0] + t[1];
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    sum += w;
  }
  return sum;
}

void FillPattern(void* data, uint64_t bytes) {
  auto* p = static_cast<uint8_t*>(data);
  uint64_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    const uint64_t w = Mix64(i / 8 + kGolden);
    std::memcpy(p + i, &w, 8);
  }
  for (; i < bytes; ++i) p[i] = 0xA5;
}

}  // namespace zephon::shm::bench
