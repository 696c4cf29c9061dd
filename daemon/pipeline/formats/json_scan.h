// JSON line scanning: extract one top-level integer-array field from a JSON object,
// parsed by simdjson's On-Demand API (Debian libsimdjson-dev).
//
// The line must be exactly one RFC 8259 JSON object, optionally surrounded by
// whitespace, in valid UTF-8. Every value is consumed, so every value is validated:
// strings (no raw control characters; escapes \" \\ \/ \b \f \n \r \t and \uXXXX with
// surrogates paired), numbers (-?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?, finite as
// a double; integers of any length), true/false/null and nested containers up to
// kMaxJsonDepth levels. Keys are compared after unescaping, so "input\u005fids" names
// the field input_ids.
// The field's value must be an array whose elements are integers in [0, 2^31): no
// fraction, no exponent, no sign. The field must appear exactly once at the top level
// (nested occurrences are ignored).
// StringFieldScanner reads a top-level string field instead, with the same strictness
// (whole line validated, the field exactly once at the top level), except that escapes
// of unpaired surrogates (\ud800 alone) are accepted anywhere: in the field's value they
// become U+FFFD, as a JavaScript JSON.parse + UTF-8 encoding (and so HF tokenizers'
// node binding) reads them; Python's json.loads + encode("utf-8", "replace") would give
// '?'. A missing or non-string field is a state, not an error (on_missing="skip").
// Errors are INVALID_ARGUMENT saying what is wrong (malformed JSON and simdjson's reason,
// missing field, duplicate field, not an array, element K not an integer / negative /
// out of range) with the byte offset in the line where it was found (for malformed
// JSON: where simdjson stopped, which may be after the bad byte; 0 when the line could
// not be indexed at all, e.g. invalid UTF-8 or unbalanced brackets).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_JSON_SCAN_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_JSON_SCAN_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace zephon::pipeline {

inline constexpr int kMaxJsonDepth = 256;

// Bytes simdjson may read past the end of a line (SIMDJSON_PADDING; checked in
// json_scan.cc). Their content does not matter, only that they are readable.
inline constexpr size_t kJsonPaddingBytes = 64;

// Scans lines for one field, reusing the parser's buffers from line to line.
// Single-owner (not thread-safe); one per conversion.
class TokenArrayScanner {
 public:
  explicit TokenArrayScanner(std::string field);
  ~TokenArrayScanner();
  TokenArrayScanner(const TokenArrayScanner&) = delete;
  TokenArrayScanner& operator=(const TokenArrayScanner&) = delete;

  // Appends the tokens of the field to *out (see the file comment). `readable_after` is
  // how many bytes after `line` may be read: with at least kJsonPaddingBytes the line is
  // parsed in place, else it is first copied into a padded buffer. On error sets
  // *error_offset; *out may then hold a partial array (callers discard it). A bad
  // ZEPHON_SIMDJSON_KERNEL fails every line with ApplyJsonKernelOverride()'s error.
  absl::Status Scan(std::string_view line, size_t readable_after, std::vector<int32_t>* out,
                    size_t* error_offset);

 private:
  struct Parser;
  const std::string field_;
  const std::unique_ptr<Parser> parser_;
  std::string padded_;  // The copy of a line without its own padding.
};

// What StringFieldScanner found for its field.
struct StringField {
  enum class State { kString, kMissing, kNotString };
  State state = State::kMissing;
  // kString: the unescaped UTF-8 value, valid until the scanner's next Scan.
  std::string_view value;
  // kString: an escaped unpaired surrogate in the value became U+FFFD.
  bool replaced_surrogates = false;
  // kNotString: the JSON type found ("a number", "an array", ...) and its byte offset.
  std::string found_type;
  size_t offset = 0;
};

// Scans lines for one string field, reusing the parser's buffers from line to line.
// Single-owner (not thread-safe).
class StringFieldScanner {
 public:
  explicit StringFieldScanner(std::string field);
  ~StringFieldScanner();
  StringFieldScanner(const StringFieldScanner&) = delete;
  StringFieldScanner& operator=(const StringFieldScanner&) = delete;

  // Sets *out for `line` (see the file comment); `readable_after` as in
  // TokenArrayScanner::Scan. Errors (malformed JSON, a duplicate field) set
  // *error_offset.
  absl::Status Scan(std::string_view line, size_t readable_after, StringField* out,
                    size_t* error_offset);

 private:
  struct Parser;
  const std::string field_;
  const std::unique_ptr<Parser> parser_;
  std::string padded_;
  std::string unescaped_;  // A value with unpaired surrogates, unescaped here.
};

// Unescapes the body of a JSON string (without its quotes), replacing escaped unpaired
// surrogates by U+FFFD (sets *replaced). False on an invalid escape or a raw control
// character. Appends to *out.
bool UnescapeJsonStringLenient(std::string_view body, std::string* out, bool* replaced);

// One-off form of TokenArrayScanner::Scan for a line without padding (tests, fuzzing).
absl::Status ExtractTokenArray(std::string_view line, std::string_view field,
                               std::vector<int32_t>* out, size_t* error_offset);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_JSON_SCAN_H_
