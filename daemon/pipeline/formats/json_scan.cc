#include "daemon/pipeline/formats/json_scan.h"

#include <simdjson.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/utf8.h"
#include "daemon/pipeline/formats/json_kernel.h"

namespace zephon::pipeline {

static_assert(kJsonPaddingBytes >= simdjson::SIMDJSON_PADDING,
              "kJsonPaddingBytes must cover simdjson's read-ahead");

namespace od = simdjson::ondemand;

struct TokenArrayScanner::Parser {
  od::parser parser;
};

struct StringFieldScanner::Parser {
  od::parser parser;
};

namespace {

// What a simdjson error means in a JSONL line.
std::string Describe(simdjson::error_code code) {
  std::string what;
  switch (code) {
    case simdjson::UTF8_ERROR: what = "the line is not valid UTF-8"; break;
    case simdjson::UNESCAPED_CHARS: what = "raw control character in string"; break;
    case simdjson::UNCLOSED_STRING: what = "unterminated string"; break;
    case simdjson::STRING_ERROR:
      what = "invalid escape in string (or an unpaired \\u surrogate)";
      break;
    case simdjson::NUMBER_ERROR: what = "invalid number"; break;
    case simdjson::T_ATOM_ERROR:
    case simdjson::F_ATOM_ERROR:
    case simdjson::N_ATOM_ERROR: what = "invalid literal (true, false or null)"; break;
    case simdjson::TRAILING_CONTENT: what = "trailing characters after the object"; break;
    case simdjson::INCOMPLETE_ARRAY_OR_OBJECT:
      what = "unbalanced braces or brackets, or characters after the object";
      break;
    case simdjson::TAPE_ERROR:
      what = "unexpected character: a missing or extra ',', ':', brace, bracket or key, "
             "or a bare word";
      break;
    case simdjson::EMPTY: what = "empty line"; break;
    default: what = simdjson::error_message(code); break;
  }
  return absl::StrCat("malformed JSON: ", what);
}

// RFC 8259's number grammar. simdjson refuses numbers it cannot represent (integers past
// 64 bits, magnitudes past a double's range) that are still JSON numbers.
bool IsJsonNumber(std::string_view s) {
  size_t i = 0;
  auto digit = [&] { return i < s.size() && s[i] >= '0' && s[i] <= '9'; };
  auto digits = [&] {
    if (!digit()) return false;
    while (digit()) ++i;
    return true;
  };
  if (i < s.size() && s[i] == '-') ++i;
  if (!digit()) return false;
  if (s[i] == '0') {
    ++i;
  } else {
    digits();
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

std::string_view TrimRight(std::string_view raw) {
  while (!raw.empty() && (raw.back() == ' ' || raw.back() == '\t' || raw.back() == '\r' ||
                          raw.back() == '\n')) {
    raw.remove_suffix(1);
  }
  return raw;
}

// The 4 hex digits at body[i..i+4) as a code unit, or -1.
int32_t Hex4(std::string_view body, size_t i) {
  if (i + 4 > body.size()) return -1;
  int32_t v = 0;
  for (size_t k = i; k < i + 4; ++k) {
    const char c = body[k];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      d = c - 'A' + 10;
    } else {
      return -1;
    }
    v = v * 16 + d;
  }
  return v;
}

// The body of the string token `raw` (which starts at its opening quote).
std::string_view StringBody(std::string_view raw) {
  size_t i = 1;
  while (i < raw.size() && raw[i] != '"') i += raw[i] == '\\' ? 2 : 1;
  return raw.substr(1, std::min(i, raw.size()) - 1);
}

// An error found in the whole line, and where.
struct LineFault {
  simdjson::error_code code = simdjson::SUCCESS;
  size_t offset = 0;
};

// The errors simdjson's SIMD kernels find while indexing the whole line, before reading
// any value, in their order: an unterminated string, a raw control character in a string,
// bytes that are not UTF-8; then an escaped non-ASCII byte, which they find when reading
// its string (at its opening quote). The fallback kernel finds some of these later, as
// another error at another offset, and calls an escaped non-ASCII byte bad UTF-8; checked on the
// error path, every kernel reports the same error (json_kernel_test). As in simdjson, a
// backslash escapes the next byte inside and outside strings.
LineFault FaultInLine(std::string_view line) {
  bool in_string = false, escaped = false, raw_control = false;
  size_t string_start = 0;
  std::optional<size_t> escaped_non_ascii;
  for (size_t i = 0; i < line.size(); ++i) {
    const auto c = static_cast<unsigned char>(line[i]);
    if (in_string && c < 0x20) raw_control = true;
    if (escaped) {
      escaped = false;
      if (in_string && c >= 0x80 && !escaped_non_ascii) escaped_non_ascii = string_start;
    } else if (c == '\\') {
      escaped = true;
    } else if (c == '"') {
      in_string = !in_string;
      string_start = i;
    }
  }
  if (in_string) return {simdjson::UNCLOSED_STRING, 0};
  if (raw_control) return {simdjson::UNESCAPED_CHARS, 0};
  if (!simdjson::validate_utf8(line.data(), line.size())) return {simdjson::UTF8_ERROR, 0};
  if (escaped_non_ascii) return {simdjson::STRING_ERROR, *escaped_non_ascii};
  return {};
}

// One scan: consumes every value of the line (On-Demand only validates what is read)
// and records the first error with its offset. Reads either a token array (`tokens`)
// or a string field (`str`, with `unescaped` for values simdjson 3.0 refuses because
// of an unpaired surrogate escape).
class Walk {
 public:
  Walk(std::string_view line, std::string_view field, std::vector<int32_t>* tokens)
      : line_(line), field_(field), out_(tokens), str_(nullptr), unescaped_(nullptr) {}
  Walk(std::string_view line, std::string_view field, StringField* str, std::string* unescaped)
      : line_(line), field_(field), out_(nullptr), str_(str), unescaped_(unescaped) {}

  absl::Status Run(od::parser& parser, size_t capacity, size_t* error_offset) {
    if (!Document(parser, capacity)) {
      if (const LineFault fault = FaultInLine(line_); fault.code != simdjson::SUCCESS) {
        error_ = Describe(fault.code);
        error_pos_ = fault.offset;
      }
      *error_offset = std::min(error_pos_, line_.size());
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
  // Where the parser stands (the end of the line when it cannot say).
  size_t Here() {
    if (doc_ == nullptr) return 0;
    const char* at = nullptr;
    if (doc_->current_location().get(at) != simdjson::SUCCESS) return line_.size();
    return static_cast<size_t>(at - line_.data());
  }
  bool Error(simdjson::error_code code) { return Fail(Describe(code), Here()); }
  size_t OffsetOf(od::value& v) {
    return static_cast<size_t>(v.raw_json_token().data() - line_.data());
  }
  // The value's text, without the whitespace after it, at most 40 bytes.
  static std::string TextOf(od::value& v) {
    return std::string(TrimRight(v.raw_json_token()).substr(0, 40));
  }

  bool Document(od::parser& parser, size_t capacity) {
    od::document doc;
    if (auto e = parser.iterate(line_.data(), line_.size(), capacity).get(doc)) return Error(e);
    doc_ = &doc;
    od::json_type type;
    if (auto e = doc.type().get(type)) return Error(e);
    if (type != od::json_type::object) return Fail("malformed JSON: expected a JSON object", 0);
    od::object object;
    if (auto e = doc.get_object().get(object)) return Error(e);
    if (!TopObject(object)) return false;
    // current_location() is OUT_OF_BOUNDS exactly when nothing follows the object.
    const char* rest = nullptr;
    if (doc.current_location().get(rest) == simdjson::SUCCESS) {
      return Fail("malformed JSON: trailing characters after the object",
                  static_cast<size_t>(rest - line_.data()));
    }
    if (!found_) {
      if (str_ != nullptr) {
        *str_ = StringField();
        return true;
      }
      return Fail(absl::StrCat("missing field \"", std::string(field_), "\""), 0);
    }
    return true;
  }

  bool TopObject(od::object& object) {
    for (auto member : object) {
      od::field f;
      if (auto e = std::move(member).get(f)) return Error(e);
      const size_t key_pos = static_cast<size_t>(f.key().raw() - 1 - line_.data());
      std::string_view key;
      if (auto e = f.unescaped_key().get(key)) return Fail(Describe(e), key_pos);
      if (key != field_) {
        if (!Value(f.value(), 1)) return false;
        continue;
      }
      if (found_) {
        return Fail(absl::StrCat("field \"", std::string(field_), "\" appears more than once"), key_pos);
      }
      found_ = true;
      if (!(str_ != nullptr ? StringValue(f.value()) : TokenArray(f.value()))) return false;
    }
    return true;
  }

  // Consumes (and so validates) any value; `depth` is the depth of its container.
  bool Value(od::value v, int depth) {
    od::json_type type;
    if (auto e = v.type().get(type)) return Error(e);
    switch (type) {
      case od::json_type::object: {
        if (depth + 1 > kMaxJsonDepth) return Deep(v);
        od::object object;
        if (auto e = v.get_object().get(object)) return Error(e);
        for (auto member : object) {
          od::field f;
          if (auto e = std::move(member).get(f)) return Error(e);
          std::string_view key;
          if (auto e = f.unescaped_key().get(key)) return Error(e);
          if (!Value(f.value(), depth + 1)) return false;
        }
        return true;
      }
      case od::json_type::array: {
        if (depth + 1 > kMaxJsonDepth) return Deep(v);
        od::array array;
        if (auto e = v.get_array().get(array)) return Error(e);
        for (auto element : array) {
          od::value child;
          if (auto e = std::move(element).get(child)) return Error(e);
          if (!Value(child, depth + 1)) return false;
        }
        return true;
      }
      case od::json_type::string: {
        const size_t at = OffsetOf(v);
        std::string_view s;
        if (auto e = v.get_string().get(s)) {
          std::string scratch;
          bool replaced = false;
          // String scans accept unpaired surrogate escapes (see json_scan.h).
          if (e == simdjson::STRING_ERROR && str_ != nullptr &&
              UnescapeJsonStringLenient(StringBody(v.raw_json_token()), &scratch, &replaced)) {
            return true;
          }
          return Fail(Describe(e), at);
        }
        return true;
      }
      case od::json_type::number: return Number(v);
      case od::json_type::boolean: {
        bool b;
        if (v.get_bool().get(b) != simdjson::SUCCESS) {
          return Fail(Describe(simdjson::T_ATOM_ERROR), OffsetOf(v));
        }
        return true;
      }
      case od::json_type::null: {
        bool is_null = false;
        if (v.is_null().get(is_null) != simdjson::SUCCESS || !is_null) {
          return Fail(Describe(simdjson::N_ATOM_ERROR), OffsetOf(v));
        }
        return true;
      }
    }
    return Fail("malformed JSON: unexpected value", OffsetOf(v));
  }

  bool Deep(od::value& v) {
    return Fail(absl::StrCat("malformed JSON: nesting deeper than ", kMaxJsonDepth), OffsetOf(v));
  }

  // Any number, also one simdjson cannot represent (IsJsonNumber).
  bool Number(od::value& v) {
    od::number n;
    const simdjson::error_code e = v.get_number().get(n);
    if (e == simdjson::SUCCESS) return true;
    if (e == simdjson::NUMBER_ERROR && IsJsonNumber(TrimRight(v.raw_json_token()))) return true;
    return Fail(Describe(e), OffsetOf(v));
  }

  // The field's value: an array of integers in [0, 2^31).
  bool TokenArray(od::value v) {
    const size_t at = OffsetOf(v);
    od::json_type type;
    if (auto e = v.type().get(type)) return Error(e);
    if (type != od::json_type::array) {
      if (!Value(v, 1)) return false;
      return Fail(absl::StrCat("field \"", std::string(field_), "\" is not an array"), at);
    }
    od::array array;
    if (auto e = v.get_array().get(array)) return Error(e);
    size_t k = 0;
    for (auto element : array) {
      od::value x;
      if (auto e = std::move(element).get(x)) return Error(e);
      uint64_t token = 0;
      if (x.get_uint64().get(token) == simdjson::SUCCESS && token <= INT32_MAX) {
        out_->push_back(static_cast<int32_t>(token));  // The common case.
      } else if (!Element(x, k)) {
        return false;
      }
      ++k;
    }
    return true;
  }

  // The string field's value (a string, or any other value, which it records).
  bool StringValue(od::value v) {
    const size_t at = OffsetOf(v);
    od::json_type type;
    if (auto e = v.type().get(type)) return Error(e);
    if (type != od::json_type::string) {
      if (!Value(v, 1)) return false;
      *str_ = StringField();
      str_->state = StringField::State::kNotString;
      str_->offset = at;
      switch (type) {
        case od::json_type::object: str_->found_type = "an object"; break;
        case od::json_type::array: str_->found_type = "an array"; break;
        case od::json_type::number: str_->found_type = "a number"; break;
        case od::json_type::boolean: str_->found_type = "a boolean"; break;
        default: str_->found_type = "null"; break;
      }
      return true;
    }
    *str_ = StringField();
    str_->state = StringField::State::kString;
    str_->offset = at;
    std::string_view s;
    const simdjson::error_code e = v.get_string().get(s);
    if (e == simdjson::SUCCESS) {
      str_->value = s;
      return true;
    }
    unescaped_->clear();
    if (e != simdjson::STRING_ERROR ||
        !UnescapeJsonStringLenient(StringBody(v.raw_json_token()), unescaped_,
                                   &str_->replaced_surrogates)) {
      return Fail(Describe(e), at);
    }
    str_->value = *unescaped_;
    return true;
  }

  // Element k, which is not a plain integer below 2^31: says what it is instead.
  bool Element(od::value& x, size_t k) {
    const size_t at = OffsetOf(x);
    const std::string text = TextOf(x);
    const std::string what = absl::StrCat("field \"", std::string(field_), "\" element ", k);
    od::json_type type;
    if (auto e = x.type().get(type)) return Error(e);
    if (type != od::json_type::number) {
      if (!Value(x, 1)) return false;
      return Fail(absl::StrCat(what, " is not an integer: ", text), at);
    }
    if (!Number(x)) return false;
    if (text.find_first_of(".eE") != std::string::npos) {
      return Fail(absl::StrCat(what, " is not an integer: ", text), at);
    }
    if (text[0] == '-') return Fail(absl::StrCat(what, " is negative: ", text), at);
    return Fail(absl::StrCat(what, " is out of range [0, 2^31): ", text), at);
  }

  const std::string_view line_;
  const std::string_view field_;
  std::vector<int32_t>* const out_;
  StringField* const str_;
  std::string* const unescaped_;
  od::document* doc_ = nullptr;
  bool found_ = false;
  std::string error_;
  size_t error_pos_ = 0;
};

// Runs the Walk `make_walk` builds over `line` (both scanners' one path): applies the
// kernel override before the parser's first parse, which fixes its kernel (json_kernel.h),
// and copies a line without kJsonPaddingBytes readable after it into `padded` first.
template <typename MakeWalk>
absl::Status ScanLine(std::string_view line, size_t readable_after, std::string* padded,
                      od::parser& parser, size_t* error_offset, MakeWalk make_walk) {
  if (const absl::Status& kernel = ApplyJsonKernelOverride(); !kernel.ok()) {
    *error_offset = 0;
    return kernel;
  }
  if (readable_after >= kJsonPaddingBytes) {
    return make_walk(line).Run(parser, line.size() + readable_after, error_offset);
  }
  padded->assign(line.data(), line.size());
  padded->append(kJsonPaddingBytes, ' ');
  return make_walk(std::string_view(padded->data(), line.size()))
      .Run(parser, padded->size(), error_offset);
}

}  // namespace

TokenArrayScanner::TokenArrayScanner(std::string field)
    : field_(std::move(field)), parser_(std::make_unique<Parser>()) {}

TokenArrayScanner::~TokenArrayScanner() = default;

absl::Status TokenArrayScanner::Scan(std::string_view line, size_t readable_after,
                                     std::vector<int32_t>* out, size_t* error_offset) {
  return ScanLine(line, readable_after, &padded_, parser_->parser, error_offset,
                  [&](std::string_view l) { return Walk(l, field_, out); });
}

StringFieldScanner::StringFieldScanner(std::string field)
    : field_(std::move(field)), parser_(std::make_unique<Parser>()) {}

StringFieldScanner::~StringFieldScanner() = default;

absl::Status StringFieldScanner::Scan(std::string_view line, size_t readable_after,
                                      StringField* out, size_t* error_offset) {
  *out = StringField();
  return ScanLine(line, readable_after, &padded_, parser_->parser, error_offset,
                  [&](std::string_view l) { return Walk(l, field_, out, &unescaped_); });
}

bool UnescapeJsonStringLenient(std::string_view body, std::string* out, bool* replaced) {
  size_t i = 0;
  while (i < body.size()) {
    const char c = body[i];
    if (static_cast<unsigned char>(c) < 0x20) return false;
    if (c != '\\') {
      out->push_back(c);
      ++i;
      continue;
    }
    if (i + 1 >= body.size()) return false;
    const char e = body[i + 1];
    i += 2;
    switch (e) {
      case '"': out->push_back('"'); continue;
      case '\\': out->push_back('\\'); continue;
      case '/': out->push_back('/'); continue;
      case 'b': out->push_back('\b'); continue;
      case 'f': out->push_back('\f'); continue;
      case 'n': out->push_back('\n'); continue;
      case 'r': out->push_back('\r'); continue;
      case 't': out->push_back('\t'); continue;
      case 'u': break;
      default: return false;
    }
    const int32_t unit = Hex4(body, i);
    if (unit < 0) return false;
    i += 4;
    if (unit < 0xD800 || unit > 0xDFFF) {
      AppendUtf8(static_cast<uint32_t>(unit), out);
      continue;
    }
    if (unit <= 0xDBFF && i + 1 < body.size() && body[i] == '\\' && body[i + 1] == 'u') {
      const int32_t low = Hex4(body, i + 2);
      if (low < 0) return false;
      if (low >= 0xDC00 && low <= 0xDFFF) {
        AppendUtf8(0x10000 + ((static_cast<uint32_t>(unit) - 0xD800) << 10) +
                       (static_cast<uint32_t>(low) - 0xDC00),
                   out);
        i += 6;
        continue;
      }
    }
    AppendUtf8(0xFFFD, out);  // An unpaired surrogate.
    *replaced = true;
  }
  return true;
}

absl::Status ExtractTokenArray(std::string_view line, std::string_view field,
                               std::vector<int32_t>* out, size_t* error_offset) {
  return TokenArrayScanner(std::string(field)).Scan(line, 0, out, error_offset);
}

}  // namespace zephon::pipeline
