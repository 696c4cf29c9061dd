// The hand-written JSON line scanner that daemon/pipeline/formats/json_scan.cc replaced with
// simdjson, kept here only as the benchmark's baseline (jsonl_scan_bench.cc); verbatim
// but for the names.
#include "tests/bench/jsonl/legacy_json_scan.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"

namespace zephon::bench {
namespace {

constexpr int kMaxJsonDepth = 256;

bool IsWs(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Recursive-descent scanner over one line. Every method advances pos_ past what it
// consumed or records the first error (message + offset) and returns false.
class Scanner {
 public:
  Scanner(std::string_view text, std::string_view field, std::vector<int32_t>* out)
      : text_(text), field_(field), out_(out) {}

  absl::Status Run(size_t* error_offset) {
    if (!Document()) {
      *error_offset = error_pos_;
      return absl::InvalidArgumentError(error_);
    }
    return absl::OkStatus();
  }

 private:
  bool Fail(std::string message, size_t at) {
    error_ = std::move(message);
    error_pos_ = at;
    return false;
  }
  bool AtEnd() const { return pos_ >= text_.size(); }
  char Peek() const { return AtEnd() ? '\0' : text_[pos_]; }
  void SkipWs() {
    while (!AtEnd() && IsWs(text_[pos_])) ++pos_;
  }
  bool Expect(char c, const char* what) {
    SkipWs();
    if (Peek() != c) return Unexpected(what);
    ++pos_;
    return true;
  }
  bool Unexpected(const char* expected) {
    if (AtEnd()) return Fail(absl::StrCat("malformed JSON: unexpected end of line, expected ",
                                          expected), pos_);
    return Fail(absl::StrCat("malformed JSON: unexpected '", std::string(1, text_[pos_]),
                             "', expected ", expected), pos_);
  }

  bool Document() {
    SkipWs();
    if (Peek() != '{') return Unexpected("a JSON object");
    if (!Object(/*depth=*/1, /*top=*/true)) return false;
    SkipWs();
    if (!AtEnd()) return Fail("malformed JSON: trailing characters after the object", pos_);
    if (!found_) return Fail(absl::StrCat("missing field \"", std::string(field_), "\""), 0);
    return true;
  }

  // REQUIRES: Peek() == '{'.
  bool Object(int depth, bool top) {
    if (!Enter(depth)) return false;
    std::string key;
    return Members('}', "',' or '}'", [&] {
      if (Peek() != '"') return Unexpected("a string key");
      const size_t key_pos = pos_;
      key.clear();
      if (!String(&key)) return false;
      if (!Expect(':', "':'")) return false;
      SkipWs();
      if (top && key == field_) {
        if (found_) {
          return Fail(absl::StrCat("field \"", std::string(field_), "\" appears more than once"), key_pos);
        }
        found_ = true;
        return TokenArray();
      }
      return Value(depth);
    });
  }

  // REQUIRES: Peek() == '['.
  bool Array(int depth) {
    if (!Enter(depth)) return false;
    return Members(']', "',' or ']'", [&] { return Value(depth); });
  }

  // Opens a container at `depth`: fails past kMaxJsonDepth, else consumes the bracket.
  bool Enter(int depth) {
    if (depth > kMaxJsonDepth) {
      return Fail(absl::StrCat("malformed JSON: nesting deeper than ", kMaxJsonDepth), pos_);
    }
    ++pos_;
    return true;
  }

  // The members of a container whose opening bracket was consumed: `member` parses one
  // (whitespace before it skipped), then ',' continues and `close` ends the container;
  // anything else is an error expecting `separators`. An empty container is fine.
  template <typename ParseMember>
  bool Members(char close, const char* separators, ParseMember member) {
    SkipWs();
    if (Peek() == close) {
      ++pos_;
      return true;
    }
    while (true) {
      SkipWs();
      if (!member()) return false;
      SkipWs();
      if (Peek() == ',') {
        ++pos_;
        continue;
      }
      if (Peek() == close) {
        ++pos_;
        return true;
      }
      return Unexpected(separators);
    }
  }

  // Any value; `depth` is the depth of the enclosing container.
  bool Value(int depth) {
    SkipWs();
    const char c = Peek();
    if (c == '{') return Object(depth + 1, /*top=*/false);
    if (c == '[') return Array(depth + 1);
    if (c == '"') return String(nullptr);
    if (c == '-' || IsDigit(c)) return Number(nullptr);
    if (c == 't') return Literal("true");
    if (c == 'f') return Literal("false");
    if (c == 'n') return Literal("null");
    return Unexpected("a value");
  }

  bool Literal(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return Unexpected("a value");
    pos_ += word.size();
    return true;
  }

  // REQUIRES: Peek() == '"'. Appends the unescaped bytes to *out when non-null.
  bool String(std::string* out) {
    const size_t start = pos_++;
    while (true) {
      if (AtEnd()) return Fail("malformed JSON: unterminated string", start);
      const char c = text_[pos_];
      if (c == '"') {
        ++pos_;
        return true;
      }
      if (static_cast<unsigned char>(c) < 0x20) {
        return Fail("malformed JSON: raw control character in string", pos_);
      }
      if (c != '\\') {
        if (out) out->push_back(c);
        ++pos_;
        continue;
      }
      const size_t esc = pos_++;
      if (AtEnd()) return Fail("malformed JSON: unterminated string", start);
      const char e = text_[pos_++];
      char plain = 0;
      switch (e) {
        case '"': plain = '"'; break;
        case '\\': plain = '\\'; break;
        case '/': plain = '/'; break;
        case 'b': plain = '\b'; break;
        case 'f': plain = '\f'; break;
        case 'n': plain = '\n'; break;
        case 'r': plain = '\r'; break;
        case 't': plain = '\t'; break;
        case 'u': {
          uint32_t cp = 0;
          if (!Hex4(esc, &cp)) return false;
          // A high surrogate followed by an escaped low surrogate is one code point;
          // lone surrogates are kept as-is (they cannot match a field name anyway).
          if (cp >= 0xD800 && cp < 0xDC00 && text_.substr(pos_, 2) == "\\u") {
            const size_t save = pos_;
            pos_ += 2;
            uint32_t low = 0;
            if (!Hex4(save, &low)) return false;
            if (low >= 0xDC00 && low < 0xE000) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else {
              pos_ = save;
            }
          }
          if (out) AppendUtf8(cp, out);
          continue;
        }
        default:
          return Fail(absl::StrCat("malformed JSON: invalid escape '\\", std::string(1, e), "'"),
                      esc);
      }
      if (out) out->push_back(plain);
    }
  }

  bool Hex4(size_t esc, uint32_t* cp) {
    if (pos_ + 4 > text_.size()) return Fail("malformed JSON: truncated \\u escape", esc);
    for (int i = 0; i < 4; ++i) {
      const int h = HexValue(text_[pos_ + i]);
      if (h < 0) return Fail("malformed JSON: invalid \\u escape", esc);
      *cp = *cp * 16 + static_cast<uint32_t>(h);
    }
    pos_ += 4;
    return true;
  }

  // A JSON number; when `result` is non-null, also says whether it is a plain
  // non-negative integer below 2^31 and its value.
  struct IntResult {
    bool plain = false;     // digits only
    bool negative = false;
    bool fits = false;      // plain and < 2^31
    int32_t value = 0;
  };
  bool Number(IntResult* result) {
    const size_t start = pos_;
    IntResult r;
    if (Peek() == '-') {
      r.negative = true;
      ++pos_;
    }
    if (!IsDigit(Peek())) return Unexpected("a digit");
    uint64_t value = 0;
    bool overflow = false;
    if (Peek() == '0') {
      ++pos_;
      if (IsDigit(Peek())) return Fail("malformed JSON: number with a leading zero", start);
    } else {
      while (IsDigit(Peek())) {
        value = value * 10 + static_cast<uint64_t>(Peek() - '0');
        if (value > INT32_MAX) {
          overflow = true;
          value = uint64_t{INT32_MAX} + 1;  // Saturate: only "too big" matters.
        }
        ++pos_;
      }
    }
    r.plain = true;
    if (Peek() == '.') {
      r.plain = false;
      ++pos_;
      if (!IsDigit(Peek())) return Unexpected("a digit after '.'");
      while (IsDigit(Peek())) ++pos_;
    }
    if (Peek() == 'e' || Peek() == 'E') {
      r.plain = false;
      ++pos_;
      if (Peek() == '+' || Peek() == '-') ++pos_;
      if (!IsDigit(Peek())) return Unexpected("a digit in the exponent");
      while (IsDigit(Peek())) ++pos_;
    }
    r.fits = r.plain && !r.negative && !overflow;
    r.value = static_cast<int32_t>(value);
    if (result) *result = r;
    return true;
  }

  // The field's value: an array of integers in [0, 2^31).
  bool TokenArray() {
    SkipWs();
    if (Peek() != '[') {
      const size_t at = pos_;
      if (!Value(1)) return false;
      return Fail(absl::StrCat("field \"", std::string(field_), "\" is not an array"), at);
    }
    ++pos_;
    size_t k = 0;
    return Members(']', "',' or ']'", [&] {
      const size_t at = pos_;
      const char c = Peek();
      if (c == '-' || IsDigit(c)) {
        IntResult r;
        if (!Number(&r)) return false;
        if (!r.plain) {
          return Fail(absl::StrCat("field \"", std::string(field_), "\" element ", k,
                                   " is not an integer: ", std::string(text_.substr(at, pos_ - at))), at);
        }
        if (r.negative) {
          return Fail(absl::StrCat("field \"", std::string(field_), "\" element ", k,
                                   " is negative: ", std::string(text_.substr(at, pos_ - at))), at);
        }
        if (!r.fits) {
          return Fail(absl::StrCat("field \"", std::string(field_), "\" element ", k,
                                   " is out of range [0, 2^31): ", std::string(text_.substr(at, pos_ - at))),
                      at);
        }
        out_->push_back(r.value);
      } else {
        if (!Value(1)) return false;
        return Fail(absl::StrCat("field \"", std::string(field_), "\" element ", k, " is not an integer: ",
                                 std::string(text_.substr(at, std::min<size_t>(pos_ - at, 40)))), at);
      }
      ++k;
      return true;
    });
  }

  const std::string_view text_;
  const std::string_view field_;
  std::vector<int32_t>* const out_;
  size_t pos_ = 0;
  bool found_ = false;
  std::string error_;
  size_t error_pos_ = 0;
};

}  // namespace

absl::Status LegacyExtractTokenArray(std::string_view line, std::string_view field,
                               std::vector<int32_t>* out, size_t* error_offset) {
  return Scanner(line, field, out).Run(error_offset);
}

}  // namespace zephon::bench
