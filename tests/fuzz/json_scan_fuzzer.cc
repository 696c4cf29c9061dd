// Fuzz target: the JSONL line scanner (daemon/pipeline/formats/json_scan.cc), which parses
// every line of user-supplied .jsonl datasets.
//
// Input: one line, scanned for the field "input_ids". Invariants beyond "no crash, no
// UB" (the recursion is bounded by kMaxJsonDepth, so deep nesting must not overflow the
// stack either):
//   * an error is INVALID_ARGUMENT with a message and an offset inside the line;
//   * on success every token is in [0, 2^31), and the tokens round trip: the canonical
//     line {"input_ids":[t0,t1,...]} scans to the same tokens;
//   * on success the same line wrapped as a nested value ({"x":LINE,"input_ids":[]})
//     scans too (validation does not depend on depth below the limit), giving [].
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/pipeline/formats/json_scan.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

// One scanner for the whole run, as a dataset conversion keeps one: building a simdjson
// parser per input cost most of the fuzzer's time (~850 inputs/s), and reusing its
// buffers across inputs is how the daemon runs it.
absl::Status Scan(std::string_view line, std::vector<int32_t>* out, size_t* error_offset) {
  static auto* scanner = new zephon::pipeline::TokenArrayScanner("input_ids");
  out->clear();
  return scanner->Scan(line, /*readable_after=*/0, out, error_offset);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view line(reinterpret_cast<const char*>(data), size);
  std::vector<int32_t> tokens;
  size_t error_offset = 0;
  const absl::Status s = Scan(line, &tokens, &error_offset);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == absl::StatusCode::kInvalidArgument, s.ToString());
    FUZZ_CHECK(!s.message().empty(), "empty error message");
    FUZZ_CHECK(error_offset <= size, absl::StrCat("offset ", error_offset, " past the line (",
                                                  size, " bytes): ", s.ToString()));
    return 0;
  }
  for (int32_t t : tokens) FUZZ_CHECK(t >= 0, absl::StrCat("negative token ", t));

  const std::string canonical = absl::StrCat("{\"input_ids\":[", absl::StrJoin(tokens, ","), "]}");
  std::vector<int32_t> again;
  const absl::Status s2 = Scan(canonical, &again, &error_offset);
  FUZZ_CHECK(s2.ok(), s2.ToString());
  FUZZ_CHECK(again == tokens, "tokens do not round trip through " + canonical);

  // Wrapping adds one level of nesting: only a line already at the depth limit may fail.
  const std::string wrapped = absl::StrCat("{\"x\":", std::string(line), ",\"input_ids\":[]}");
  std::vector<int32_t> none;
  const absl::Status s3 = Scan(wrapped, &none, &error_offset);
  FUZZ_CHECK(s3.ok() || s3.message().find("nesting deeper") != std::string_view::npos,
             s3.ToString());
  FUZZ_CHECK(none.empty(), "nested input_ids leaked into the top-level field");
  return 0;
}
