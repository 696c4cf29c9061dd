// jsonl_scan_bench: JSONL line scanning speed, simdjson (daemon/pipeline/formats/json_scan.h)
// vs the hand-written scanner it replaced (legacy_json_scan.h), on a generated corpus
// held in memory, so that only the scanning is timed (no disk, no decompression).
//
// Corpus: --mb MB (default 200) of lines {"text": "...", "input_ids": [t0, ..., tN-1]}
// with --tokens N (default 2048) token ids drawn uniformly from [0, 50257) (a GPT-2
// vocabulary), generated from a fixed seed. Each scanner scans every line --rounds
// times (default 3); the best round is reported, in MB/s of JSON text:
//   legacy            the old scanner
//   simdjson          TokenArrayScanner in place (the lines are followed by the rest of
//                     the corpus, as LineReader's lines are by its buffer)
//   simdjson+copy     TokenArrayScanner copying every line into a padded buffer
// and the ratio simdjson / legacy. Both must find the same tokens (checked).
// Usage: bazel run -c opt //tests/bench/jsonl:jsonl_scan_bench -- [--mb N] [--tokens N]
//        [--rounds N]   (make bench-jsonl BENCH_ARGS="...").
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
#include "daemon/pipeline/formats/json_scan.h"
#include "tests/bench/jsonl/legacy_json_scan.h"

namespace {

struct Args {
  uint64_t mb = 200;
  uint64_t tokens = 2048;
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
    } else if (flag == "--rounds") {
      args->rounds = static_cast<int>(value);
    } else {
      std::fprintf(stderr, "unknown flag %s (known: --mb, --tokens, --rounds)\n", flag.c_str());
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

Corpus Generate(const Args& args) {
  Corpus c;
  std::mt19937_64 rng(20261201);
  std::uniform_int_distribution<int32_t> token(0, 50256);
  const uint64_t bytes = args.mb * 1000 * 1000;
  std::vector<size_t> starts;
  while (c.text.size() < bytes) {
    starts.push_back(c.text.size());
    c.text += R"({"text": "a document of about this length \u00e9 with \"escapes\"", "input_ids": [)";
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

// Scans every line with `scan`; returns the best round's MB/s, or -1 after an error.
double Measure(const char* name, const Corpus& c, int rounds,
               const std::function<absl::Status(std::string_view, std::vector<int32_t>*)>& scan) {
  double best = 0;
  std::vector<int32_t> tokens;
  for (int r = 0; r < rounds; ++r) {
    uint64_t found = 0;
    const auto start = std::chrono::steady_clock::now();
    for (std::string_view line : c.lines) {
      tokens.clear();
      const absl::Status s = scan(line, &tokens);
      if (!s.ok()) {
        std::fprintf(stderr, "%s: %s\n", name, std::string(s.message()).c_str());
        return -1;
      }
      found += tokens.size();
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (found != c.tokens) {
      std::fprintf(stderr, "%s found %llu tokens, expected %llu\n", name,
                   static_cast<unsigned long long>(found),
                   static_cast<unsigned long long>(c.tokens));
      return -1;
    }
    const double mbps = static_cast<double>(c.text.size()) / 1e6 / seconds;
    if (mbps > best) best = mbps;
  }
  std::printf("  %-14s %8.1f MB/s\n", name, best);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!ParseArgs(argc, argv, &args)) return 2;
  const Corpus c = Generate(args);
  std::printf("corpus: %.1f MB, %zu lines of %llu tokens; best of %d rounds\n",
              static_cast<double>(c.text.size()) / 1e6, c.lines.size(),
              static_cast<unsigned long long>(args.tokens), args.rounds);
  size_t at = 0;
  const double legacy =
      Measure("legacy", c, args.rounds, [&](std::string_view line, std::vector<int32_t>* out) {
        return zephon::bench::LegacyExtractTokenArray(line, "input_ids", out, &at);
      });
  zephon::pipeline::TokenArrayScanner scanner("input_ids");
  const char* end = c.text.data() + c.text.size();
  const double fast =
      Measure("simdjson", c, args.rounds, [&](std::string_view line, std::vector<int32_t>* out) {
        const size_t after = static_cast<size_t>(end - (line.data() + line.size()));
        return scanner.Scan(line, after, out, &at);
      });
  const double copied = Measure("simdjson+copy", c, args.rounds,
                                [&](std::string_view line, std::vector<int32_t>* out) {
                                  return scanner.Scan(line, 0, out, &at);
                                });
  if (legacy <= 0 || fast <= 0 || copied <= 0) return 1;
  std::printf("  ratio simdjson / legacy: %.2fx (with a copy per line: %.2fx)\n",
              fast / legacy, copied / legacy);
  return 0;
}
