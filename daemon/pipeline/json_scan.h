// JSON line scanning: extract one top-level integer-array field from a JSON object.
//
// A small, strict RFC 8259 scanner (no DOM, no allocation beyond the output and the
// decoded keys). The line must be exactly one JSON object, optionally surrounded by
// whitespace (space, tab, CR, LF). Every value is validated while being skipped:
// strings (no raw control characters; escapes \" \\ \/ \b \f \n \r \t and \uXXXX),
// numbers (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?), true/false/null and nested
// arrays/objects up to kMaxJsonDepth levels. Keys are compared after unescaping, so
// "input\u005fids" names the field input_ids. Bytes >= 0x80 are passed through
// unvalidated (they can only appear inside strings).
// The field's value must be an array whose elements are integers in [0, 2^31): no
// fraction, no exponent, no sign. The field must appear exactly once at the top level
// (nested occurrences are ignored).
// Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_JSON_SCAN_H_
#define ZEPHON_DAEMON_PIPELINE_JSON_SCAN_H_

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace zephon::pipeline {

inline constexpr int kMaxJsonDepth = 256;

// Appends the tokens of top-level field `field` of the JSON object `line` to *out.
// On error returns INVALID_ARGUMENT whose message says what is wrong (malformed JSON,
// missing field, duplicate field, not an array, element K not a non-negative integer,
// element K out of range) and sets *error_offset to the byte offset in `line` where
// the problem was found; *out may then hold a partial array (callers discard it).
absl::Status ExtractTokenArray(std::string_view line, std::string_view field,
                               std::vector<int32_t>* out, size_t* error_offset);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_JSON_SCAN_H_
