// Canonical JSON text: the same document always gives the same bytes (object keys sorted
// by bytes, no insignificant whitespace, numbers re-printed), so a tokenizer's
// fingerprint does not change when its tokenizer.json is re-saved or re-indented.
//
// Thread-safety: pure function.
#ifndef ZEPHON_TOKENIZER_CANONICAL_JSON_H_
#define ZEPHON_TOKENIZER_CANONICAL_JSON_H_

#include <string>

#include <simdjson.h>

namespace zephon::tokenizer {

// Appends `s` as a JSON string (quotes, \" \\ and \u00XX escapes; other bytes as they are).
void AppendJsonString(std::string_view s, std::string* out);

// Appends the canonical text of `element` to *out.
void AppendCanonicalJson(simdjson::dom::element element, std::string* out);

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_CANONICAL_JSON_H_
