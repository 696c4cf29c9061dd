#include "tokenizer/canonical_json.h"

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace zephon::tokenizer {

void AppendJsonString(std::string_view s, std::string* out) {
  out->push_back('"');
  for (char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\') {
      out->push_back('\\');
      out->push_back(ch);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out->append(buf);
    } else {
      out->push_back(ch);
    }
  }
  out->push_back('"');
}

void AppendCanonicalJson(simdjson::dom::element element, std::string* out) {
  using simdjson::dom::element_type;
  switch (element.type()) {
    case element_type::OBJECT: {
      std::vector<std::pair<std::string_view, simdjson::dom::element>> fields;
      const simdjson::dom::object object = element.get_object().value_unsafe();
      for (auto field : object) {
        fields.emplace_back(field.key, field.value);
      }
      std::stable_sort(fields.begin(), fields.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
      out->push_back('{');
      for (size_t i = 0; i < fields.size(); ++i) {
        if (i > 0) out->push_back(',');
        AppendJsonString(fields[i].first, out);
        out->push_back(':');
        AppendCanonicalJson(fields[i].second, out);
      }
      out->push_back('}');
      break;
    }
    case element_type::ARRAY: {
      out->push_back('[');
      bool first = true;
      const simdjson::dom::array array = element.get_array().value_unsafe();
      for (auto v : array) {
        if (!first) out->push_back(',');
        first = false;
        AppendCanonicalJson(v, out);
      }
      out->push_back(']');
      break;
    }
    case element_type::STRING:
      AppendJsonString(element.get_string().value_unsafe(), out);
      break;
    case element_type::INT64:
      absl::StrAppend(out, element.get_int64().value_unsafe());
      break;
    case element_type::UINT64:
      absl::StrAppend(out, element.get_uint64().value_unsafe());
      break;
    case element_type::DOUBLE: {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.17g", element.get_double().value_unsafe());
      out->append(buf);
      break;
    }
    case element_type::BOOL:
      out->append(element.get_bool().value_unsafe() ? "true" : "false");
      break;
    case element_type::NULL_VALUE:
      out->append("null");
      break;
  }
}

}  // namespace zephon::tokenizer
