// The JSON line scanner before simdjson (see legacy_json_scan.cc): the baseline of
// jsonl_scan_bench only. Same contract as zephon::pipeline::ExtractTokenArray except
// that bytes >= 0x80 are not validated and unpaired \u surrogates are accepted.
// Pure function; thread-safe.
#ifndef ZEPHON_TESTS_BENCH_JSONL_LEGACY_JSON_SCAN_H_
#define ZEPHON_TESTS_BENCH_JSONL_LEGACY_JSON_SCAN_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace zephon::bench {

absl::Status LegacyExtractTokenArray(std::string_view line, std::string_view field,
                                     std::vector<int32_t>* out, size_t* error_offset);

}  // namespace zephon::bench

#endif  // ZEPHON_TESTS_BENCH_JSONL_LEGACY_JSON_SCAN_H_
