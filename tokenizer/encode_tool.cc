// encode_tool: JSONL documents in, JSONL token ids out, with the tokenizer library. The
// driver of tests/tokenize (exactness against HF tokenizers) and of `make bench-tokenize`.
//
//   encode_tool --tokenizer PATH [--special_tokens MODE] [--split_special_tokens]
//               [--decode] [--bench_seconds S] [--memory] [--window N]
//               [--max_unsplit_bytes N] < docs.jsonl > ids.jsonl
//
// Each input line is {"text": "..."}; each output line is {"ids": [...]} (plus
// "decoded": "..." with --decode). With --memory, each document's Encode also reports on
// stderr how far it raised the process's peak resident memory above what was resident
// before it (Linux: /proc/self/clear_refs resets the peak; docs/benchmarks.md).
// --window and --max_unsplit_bytes set TokenizerOptions' window_for_testing and
// max_unsplit_bytes (tests/tokenize crosses window edges with a tiny window). With --bench_seconds, nothing is written per line: the
// documents are encoded repeatedly on one thread for at least S seconds (after one warm-up
// pass) and one JSON line reports bytes, tokens, seconds, MB/s and tokens/s.
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tokenizer/canonical_json.h"
#include "tokenizer/tokenizer.h"

namespace {

using zephon::tokenizer::AppendJsonString;
using zephon::tokenizer::SpecialTokens;
using zephon::tokenizer::Tokenizer;

int Fail(const std::string& message) {
  std::fprintf(stderr, "encode_tool: %s\n", message.c_str());
  return 2;
}

// A "VmRSS:" / "VmHWM:" figure of /proc/self/status in MB, or -1.
double ProcStatusMb(const std::string& key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key, 0) == 0) return std::atof(line.c_str() + key.size()) / 1024.0;
  }
  return -1;
}

// Resets the peak resident size (VmHWM) to the current one (Linux >= 4.0).
bool ResetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  return static_cast<bool>(clear.flush());
}

}  // namespace

int main(int argc, char** argv) {
  std::string path, special = "none";
  bool split_special = false, decode = false, memory = false;
  double bench_seconds = 0;
  zephon::tokenizer::TokenizerOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (arg == "--tokenizer") path = value();
    else if (arg == "--special_tokens") special = value();
    else if (arg == "--split_special_tokens") split_special = true;
    else if (arg == "--decode") decode = true;
    else if (arg == "--memory") memory = true;
    else if (arg == "--window") options.window_for_testing = std::stoull(value());
    else if (arg == "--max_unsplit_bytes") options.max_unsplit_bytes = std::stoull(value());
    else if (arg == "--bench_seconds") bench_seconds = std::atof(value().c_str());
    else return Fail(absl::StrCat("unknown argument '", arg, "'; see the usage in encode_tool.cc"));
  }
  if (path.empty()) return Fail("--tokenizer PATH is required");
  absl::StatusOr<SpecialTokens> mode = zephon::tokenizer::ParseSpecialTokens(special);
  if (!mode.ok()) return Fail(mode.status().ToString());
  options.split_special_tokens = split_special;
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Load(path, options);
  if (!tok.ok()) return Fail(tok.status().ToString());

  std::vector<std::string> texts;
  simdjson::dom::parser parser;
  std::string line;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    std::string_view text;
    simdjson::dom::element doc;
    if (parser.parse(line).get(doc) || doc["text"].get(text)) {
      return Fail(absl::StrCat("stdin line ", line_no, ": expected {\"text\": \"...\"}"));
    }
    texts.emplace_back(text);
  }

  if (bench_seconds > 0) {
    size_t bytes = 0;
    for (const std::string& t : texts) bytes += t.size();
    std::vector<int32_t> ids;
    for (const std::string& t : texts) (void)(*tok)->Encode(t, *mode, &ids);  // warm-up
    size_t tokens = 0, passes = 0;
    const auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    while (elapsed < bench_seconds) {
      for (const std::string& t : texts) {
        ids.clear();
        if (absl::Status s = (*tok)->Encode(t, *mode, &ids); !s.ok()) return Fail(s.ToString());
        tokens += ids.size();
      }
      ++passes;
      elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    std::printf(
        "{\"bytes\": %zu, \"tokens\": %zu, \"passes\": %zu, \"seconds\": %.4f, "
        "\"mb_per_s\": %.3f, \"tokens_per_s\": %.1f}\n",
        bytes * passes, tokens, passes, elapsed, bytes * passes / elapsed / 1e6,
        tokens / elapsed);
    return 0;
  }

  std::string out;
  for (size_t n = 0; n < texts.size(); ++n) {
    const std::string& t = texts[n];
    const double rss_before = memory ? ProcStatusMb("VmRSS:") : 0;
    if (memory && !ResetPeakRss()) return Fail("--memory: cannot write /proc/self/clear_refs");
    const auto start = std::chrono::steady_clock::now();
    absl::StatusOr<std::vector<int32_t>> ids = (*tok)->Encode(t, *mode);
    if (!ids.ok()) return Fail(ids.status().ToString());
    if (memory) {
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double peak = ProcStatusMb("VmHWM:");
      std::fprintf(stderr,
                   "encode_tool: document %zu: %zu bytes, %zu tokens, %.2f s; resident "
                   "before %.1f MiB, peak during Encode %.1f MiB (+%.1f MiB; the ids alone "
                   "%.1f MiB)\n",
                   n + 1, t.size(), ids->size(), seconds, rss_before, peak, peak - rss_before,
                   ids->capacity() * sizeof(int32_t) / 1048576.0);
    }
    out.assign("{\"ids\": [");
    for (size_t k = 0; k < ids->size(); ++k) {
      if (k > 0) out.append(", ");
      absl::StrAppend(&out, (*ids)[k]);
    }
    out.push_back(']');
    if (decode) {
      absl::StatusOr<std::string> text = (*tok)->Decode(*ids);
      if (!text.ok()) return Fail(text.status().ToString());
      out.append(", \"decoded\": ");
      AppendJsonString(*text, &out);
    }
    out.append("}\n");
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  return 0;
}
