#include "daemon/pipeline/formats/loss_mask.h"

#include <simdjson.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zephon::pipeline {

const char* LossMaskFormatName(LossMaskFormat format) {
  return format == LossMaskFormat::kSpans ? "spans" : "values";
}

absl::Status MaskFromValues(absl::Span<const int64_t> values, uint64_t tokens,
                            std::vector<uint8_t>* mask) {
  if (values.size() != tokens) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the loss mask has ", values.size(), " values but the record has ", tokens,
        " tokens; they must be equal (one 0/1 per token)"));
  }
  mask->assign(tokens, 0);
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] != 0 && values[i] != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("loss mask value ", i, " is ", values[i], ", not 0 or 1"));
    }
    (*mask)[i] = static_cast<uint8_t>(values[i]);
  }
  return absl::OkStatus();
}

absl::Status MaskFromSpans(absl::Span<const int64_t> flat_pairs, uint64_t tokens,
                           std::vector<uint8_t>* mask) {
  if (flat_pairs.size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the loss mask spans hold ", flat_pairs.size(),
        " numbers, not [start, end) pairs"));
  }
  mask->assign(tokens, 0);
  for (size_t i = 0; i < flat_pairs.size(); i += 2) {
    const int64_t start = flat_pairs[i], end = flat_pairs[i + 1];
    if (start < 0 || end < start || static_cast<uint64_t>(end) > tokens) {
      return absl::InvalidArgumentError(absl::StrCat(
          "loss mask span ", i / 2, " [", start, ", ", end, ") is not within the record's ",
          tokens, " tokens (0 <= start <= end <= ", tokens, ")"));
    }
    std::fill(mask->begin() + start, mask->begin() + end, uint8_t{1});
  }
  return absl::OkStatus();
}

struct LossMaskScanner::Parser {
  simdjson::dom::parser parser;
};

LossMaskScanner::LossMaskScanner(LossMaskSource source)
    : source_(std::move(source)), parser_(std::make_unique<Parser>()) {}

LossMaskScanner::~LossMaskScanner() = default;

namespace {

// An integer (or boolean: 0/1) element as int64; false for anything else.
bool AsInteger(const simdjson::dom::element& e, int64_t* out) {
  switch (e.type()) {
    case simdjson::dom::element_type::INT64: *out = int64_t(e); return true;
    case simdjson::dom::element_type::UINT64: {
      const uint64_t v = uint64_t(e);
      *out = v > uint64_t{INT64_MAX} ? INT64_MAX : static_cast<int64_t>(v);
      return true;
    }
    case simdjson::dom::element_type::BOOL: *out = bool(e) ? 1 : 0; return true;
    default: return false;
  }
}

}  // namespace

absl::Status LossMaskScanner::Scan(std::string_view line, uint64_t tokens,
                                   std::vector<uint8_t>* mask) {
  const std::string field = absl::StrCat("loss mask field \"", source_.field, "\"");
  simdjson::dom::element doc;
  if (auto err = parser_->parser.parse(line.data(), line.size(), true).get(doc)) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON reading the ", field, ": ", simdjson::error_message(err)));
  }
  simdjson::dom::element value;
  if (doc.type() != simdjson::dom::element_type::OBJECT || doc[source_.field].get(value)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " is missing"));
  }
  simdjson::dom::array list;
  if (value.get(list)) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " is not a list (", LossMaskFormatName(source_.format), " format)"));
  }
  numbers_.clear();
  size_t k = 0;
  for (simdjson::dom::element e : list) {
    int64_t v = 0;
    if (AsInteger(e, &v)) {
      numbers_.push_back(v);
    } else if (source_.format == LossMaskFormat::kSpans &&
               e.type() == simdjson::dom::element_type::ARRAY) {
      simdjson::dom::array pair = e.get_array().value_unsafe();
      int64_t a = 0, b = 0;
      if (pair.size() != 2 || !AsInteger(pair.at(0).value_unsafe(), &a) ||
          !AsInteger(pair.at(1).value_unsafe(), &b)) {
        return absl::InvalidArgumentError(absl::StrCat(
            field, " element ", k, " is not a [start, end) pair of integers"));
      }
      numbers_.push_back(a);
      numbers_.push_back(b);
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " element ", k, source_.format == LossMaskFormat::kSpans
                                     ? " is not a [start, end) pair of integers"
                                     : " is not 0 or 1"));
    }
    ++k;
  }
  const absl::Status s = source_.format == LossMaskFormat::kSpans
                             ? MaskFromSpans(numbers_, tokens, mask)
                             : MaskFromValues(numbers_, tokens, mask);
  if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", s.message()));
  return absl::OkStatus();
}

}  // namespace zephon::pipeline
