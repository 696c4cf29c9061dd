// jsonl_scan_bench: JSONL line scanning speed, simdjson (daemon/pipeline/formats/json_scan.h)
// vs the hand-written scanner it replaced (legacy_json_scan.h), and simdjson in each of its
// kernels (json_kernel.h), on a generated corpus held in memory, so that only the scanning
// is timed (no disk, no decompression).
//
// Corpus: --mb MB (default 200) of lines {"text": "...", "input_ids": [t0, ..., tN-1]}
// with --tokens N (default 2048) token ids drawn uniformly from [0, 50257) (a GPT-2
// vocabulary), generated from a fixed seed; the text is a short sentence, or with
// --text-bytes N about N bytes of words with escapes and multi-byte UTF-8. Each scanner
// scans every line --rounds times (default 3); the best round is reported, in MB/s of
// JSON text by the wall clock and by this thread's CPU time (steadier on a busy machine):
//   legacy            the old scanner
//   simdjson          TokenArrayScanner in place (the lines are followed by the rest of
//                     the corpus, as LineReader's lines are by its buffer), in the kernel
//                     simdjson picks for this CPU
//   simdjson+copy     TokenArrayScanner copying every line into a padded buffer
//   kernel K          TokenArrayScanner in place in simdjson's kernel K, for every K this
//                     CPU runs (icelake, haswell, westmere, fallback)
// then the ratios simdjson / legacy and best kernel / fallback. Every scanner must find
// the same tokens (checked).
// Usage: bazel run -c opt //tests/bench/jsonl:jsonl_scan_bench -- [--mb N] [--tokens N]
//        [--text-bytes N] [--rounds N]   (make bench-jsonl BENCH_ARGS="...").
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "daemon/pipeline/formats/json_kernel.h"
#include "daemon/pipeline/formats/json_scan.h"
#include "tests/bench/jsonl/legacy_json_scan.h"

namespace {

struct Args {
  uint64_t mb = 200;
  uint64_t tokens = 2048;
  uint64_t text_bytes = 0;
  int rounds = 3;
};

bool ParseArgs(int argc, char** argv, Args* args) {
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "%s needs a value\n", flag.c_str());
      return false;
    }
    const long long value = std::atoll(argv[++i]);
    if (value <= 0) {
      std::fprintf(stderr, "%s must be a positive integer, got %s\n", flag.c_str(), argv[i]);
      return false;
    }
    if (flag == "--mb") {
      args->mb = static_cast<uint64_t>(value);
    } else if (flag == "--tokens") {
      args->tokens = static_cast<uint64_t>(value);
    } else if (flag == "--text-bytes") {
      args->text_bytes = static_cast<uint64_t>(value);
    } else if (flag == "--rounds") {
      args->rounds = static_cast<int>(value);
    } else {
      std::fprintf(stderr, "unknown flag %s (known: --mb, --tokens, --text-bytes, --rounds)\n", flag.c_str());
      return false;
    }
  }
  return true;
}

struct Corpus {
  std::string text;                       // the lines, '\n'-terminated, then padding
  std::vector<std::string_view> lines;    // views into text, without '\n'
  uint64_t tokens = 0;
};

// Words of a --text-bytes text: plain, escaped, and 2-, 3- and 4-byte UTF-8.
constexpr const char* kWords[] = {
    "the", "data", "loader", "reads", "every", "shard", R"(caf\u00e9)", R"(\"quoted\")",
    R"(line\nbreak)", R"(tab\t)", R"(na\u00efve)", R"(\u65e5\u672c)", "caf\xc3\xa9",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e", "\xd1\x82\xd0\xb5\xd0\xba\xd1\x81\xd1\x82",
    "\xf0\x9f\x98\x80"};

Corpus Generate(const Args& args) {
  Corpus c;
  std::mt19937_64 rng(20261201);
  std::uniform_int_distribution<int32_t> token(0, 50256);
  std::uniform_int_distribution<size_t> word(0, std::size(kWords) - 1);
  const uint64_t bytes = args.mb * 1000 * 1000;
  std::vector<size_t> starts;
  while (c.text.size() < bytes) {
    starts.push_back(c.text.size());
    c.text += R"({"text": ")";
    if (args.text_bytes == 0) {
      c.text += R"(a document of about this length \u00e9 with \"escapes\")";
    } else {
      const size_t end = c.text.size() + args.text_bytes;
      while (c.text.size() < end) {
        c.text += kWords[word(rng)];
        c.text += ' ';
      }
    }
    c.text += R"(", "input_ids": [)";
    for (uint64_t i = 0; i < args.tokens; ++i) {
      if (i > 0) c.text += ", ";
      c.text += std::to_string(token(rng));
    }
    c.text += "]}\n";
    c.tokens += args.tokens;
  }
  starts.push_back(c.text.size());
  c.text.append(zephon::pipeline::kJsonPaddingBytes, ' ');
  for (size_t i = 0; i + 1 < starts.size(); ++i) {
    c.lines.emplace_back(c.text.data() + starts[i], starts[i + 1] - starts[i] - 1);
  }
  return c;
}

double ThreadCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// The best round's MB/s by the wall clock and by CPU time; both -1 after an error.
struct Speed {
  double wall = -1;
  double cpu = -1;
};

// Scans every line with `scan`, prints and returns the speed.
Speed Measure(const std::string& name, const Corpus& c, int rounds,
              const std::function<absl::Status(std::string_view, std::vector<int32_t>*)>& scan) {
  Speed best{0, 0};
  std::vector<int32_t> tokens;
  const double mb = static_cast<double>(c.text.size()) / 1e6;
  for (int r = 0; r < rounds; ++r) {
    uint64_t found = 0;
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = ThreadCpuSeconds();
    for (std::string_view line : c.lines) {
      tokens.clear();
      const absl::Status s = scan(line, &tokens);
      if (!s.ok()) {
        std::fprintf(stderr, "%s: %s\n", name.c_str(), std::string(s.message()).c_str());
        return Speed{};
      }
      found += tokens.size();
    }
    const double cpu = ThreadCpuSeconds() - cpu_start;
    const double wall =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (found != c.tokens) {
      std::fprintf(stderr, "%s found %llu tokens, expected %llu\n", name.c_str(),
                   static_cast<unsigned long long>(found),
                   static_cast<unsigned long long>(c.tokens));
      return Speed{};
    }
    best.wall = std::max(best.wall, mb / wall);
    best.cpu = std::max(best.cpu, mb / cpu);
  }
  std::printf("  %-16s %8.1f MB/s  %8.1f MB/s CPU\n", name.c_str(), best.wall, best.cpu);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  namespace pipeline = zephon::pipeline;
  Args args;
  if (!ParseArgs(argc, argv, &args)) return 2;
  if (const absl::Status& kernel = pipeline::ApplyJsonKernelOverride(); !kernel.ok()) {
    std::fprintf(stderr, "%s\n", std::string(kernel.message()).c_str());
    return 2;
  }
  const Corpus c = Generate(args);
  std::printf("corpus: %.1f MB, %zu lines of %llu tokens and %llu text bytes; best of %d "
              "rounds\nsimdjson: %s kernel by default, value walk compiled for %s\n",
              static_cast<double>(c.text.size()) / 1e6, c.lines.size(),
              static_cast<unsigned long long>(args.tokens),
              static_cast<unsigned long long>(args.text_bytes), args.rounds,
              pipeline::JsonKernelName().c_str(),
              std::string(pipeline::JsonWalkKernelName()).c_str());
  size_t at = 0;
  const char* end = c.text.data() + c.text.size();
  auto in_place = [&](pipeline::TokenArrayScanner& scanner) {
    return [&scanner, &at, end](std::string_view line, std::vector<int32_t>* out) {
      const size_t after = static_cast<size_t>(end - (line.data() + line.size()));
      return scanner.Scan(line, after, out, &at);
    };
  };
  const Speed legacy =
      Measure("legacy", c, args.rounds, [&](std::string_view line, std::vector<int32_t>* out) {
        return zephon::bench::LegacyExtractTokenArray(line, "input_ids", out, &at);
      });
  pipeline::TokenArrayScanner scanner("input_ids");
  const Speed fast = Measure("simdjson", c, args.rounds, in_place(scanner));
  const Speed copied = Measure("simdjson+copy", c, args.rounds,
                               [&](std::string_view line, std::vector<int32_t>* out) {
                                 return scanner.Scan(line, 0, out, &at);
                               });
  if (legacy.wall <= 0 || fast.wall <= 0 || copied.wall <= 0) return 1;
  // A parser keeps the kernel of its first scan: one scanner per kernel.
  const std::string chosen = pipeline::JsonKernelName();
  Speed best_simd{0, 0}, fallback{0, 0};
  for (const std::string& kernel : pipeline::SupportedJsonKernels()) {
    if (!pipeline::UseJsonKernel(kernel).ok()) return 1;
    pipeline::TokenArrayScanner kernel_scanner("input_ids");
    const Speed speed = Measure("kernel " + kernel, c, args.rounds, in_place(kernel_scanner));
    if (speed.wall <= 0) return 1;
    if (kernel == "fallback") {
      fallback = speed;
    } else {
      best_simd.wall = std::max(best_simd.wall, speed.wall);
      best_simd.cpu = std::max(best_simd.cpu, speed.cpu);
    }
  }
  if (!pipeline::UseJsonKernel(chosen).ok()) return 1;
  std::printf("  ratio simdjson / legacy: %.2fx (with a copy per line: %.2fx); CPU time %.2fx\n",
              fast.wall / legacy.wall, copied.wall / legacy.wall, fast.cpu / legacy.cpu);
  if (best_simd.wall > 0) {
    std::printf("  ratio best SIMD kernel / fallback: %.2fx; CPU time %.2fx\n",
                best_simd.wall / fallback.wall, best_simd.cpu / fallback.cpu);
  }
  return 0;
}
