#include "daemon/pipeline/formats/record_convert.h"

#include <simdjson.h>

#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tokenizer/unicode.h"

namespace zephon::pipeline {
namespace {

const char* KindName(RecordSource::Value::Kind kind) {
  switch (kind) {
    case RecordSource::Value::Kind::kNull:
      return "null";
    case RecordSource::Value::Kind::kText:
      return "text";
    case RecordSource::Value::Kind::kTokens:
      return "token ids";
  }
  return "unknown";
}

}  // namespace

std::string_view OnNullName(OnNull on_null) {
  return on_null == OnNull::kError ? "error" : "skip";
}

absl::StatusOr<OnNull> ParseOnNull(std::string_view name) {
  if (name == "skip") return OnNull::kSkip;
  if (name == "error") return OnNull::kError;
  return absl::InvalidArgumentError(
      absl::StrCat("on_null=\"", std::string(name), "\" is not one of \"skip\", \"error\""));
}

absl::Status ConvertRecords(RecordSource* source, const std::string& name,
                            const RecordConvertOptions& options, CacheWriter* writer,
                            TextShardStats* stats) {
  *stats = TextShardStats();
  ConversionProgress* const progress = options.convert.progress;
  if (progress != nullptr) progress->Begin(name);
  const absl::Cleanup ended = [progress] {
    if (progress != nullptr) progress->End();
  };
  const TextTokenization* const text = options.text;
  const RecordSource::Value::Kind want =
      text != nullptr ? RecordSource::Value::Kind::kText : RecordSource::Value::Kind::kTokens;
  std::optional<TextBlockConverter> converter;
  if (text != nullptr) converter.emplace(name, "record", *text, options.convert, writer, stats);
  const std::optional<uint64_t> declared = source->NumRecords();
  std::string repaired;
  RecordSource::Value value, mask_value;
  std::vector<int64_t> mask_numbers;
  std::vector<uint8_t> mask;
  while (true) {
    ASSIGN_OR_RETURN(bool more, source->Next(&value));
    if (!more) break;
    if (options.mask != nullptr) {
      ASSIGN_OR_RETURN(bool has_mask, options.mask->Next(&mask_value));
      if (!has_mask) {
        return absl::DataLossError(absl::StrCat(
            name, ": the loss mask column ends before the token column (record ",
            stats->records, ")"));
      }
    }
    const uint64_t number = stats->records++;
    if (declared.has_value() && stats->records > *declared) {
      return absl::DataLossError(absl::StrCat(name, ": holds more records than the ",
                                              *declared, " its metadata declares"));
    }
    if (value.kind == RecordSource::Value::Kind::kNull) {
      if (options.on_null == OnNull::kError) {
        return absl::InvalidArgumentError(absl::StrCat(
            source->Where(), ": the field is null; fix the data, or pass on_null=\"skip\" to "
                             "skip (and count) null records"));
      }
      ++stats->null_records;
      continue;
    }
    if (value.kind != want) {
      return absl::InternalError(absl::StrCat(source->Where(), ": the source yielded ",
                                              KindName(value.kind), " where ", KindName(want),
                                              " were asked for"));
    }
    if (text == nullptr && options.mask != nullptr) {
      if (mask_value.kind != RecordSource::Value::Kind::kTokens) {
        return absl::InvalidArgumentError(absl::StrCat(
            options.mask->Where(), ": the loss mask is null where the record has ",
            value.tokens.size(), " tokens; give every record a mask"));
      }
      mask_numbers.assign(mask_value.tokens.begin(), mask_value.tokens.end());
      const absl::Status built =
          options.mask_format == LossMaskFormat::kSpans
              ? MaskFromSpans(mask_numbers, value.tokens.size(), &mask)
              : MaskFromValues(mask_numbers, value.tokens.size(), &mask);
      if (!built.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat(options.mask->Where(), ": ", built.message()));
      }
    }
    if (text == nullptr) {
      RETURN_IF_ERROR(writer->Add(value.tokens.data(), value.tokens.size(),
                                  options.mask != nullptr ? mask.data() : nullptr));
      ++stats->samples;
      stats->tokens += value.tokens.size();
      stats->tokenized_bytes += 4 * value.tokens.size();
      if (progress != nullptr) progress->Add(4 * value.tokens.size());
      continue;
    }
    std::string_view record = value.text;
    stats->tokenized_bytes += record.size();
    if (!simdjson::validate_utf8(record.data(), record.size())) {
      repaired = tokenizer::ReplaceInvalidUtf8(record);
      record = repaired;
      ++stats->invalid_utf8_records;
    }
    converter->AddRecord(number, record);
    if (converter->BlockFull()) RETURN_IF_ERROR(converter->Dispatch());
  }
  if (declared.has_value() && stats->records != *declared) {
    return absl::DataLossError(absl::StrCat(name, ": holds ", stats->records,
                                            " records where its metadata declares ", *declared,
                                            " (truncated or corrupt)"));
  }
  if (converter.has_value()) RETURN_IF_ERROR(converter->Finish());
  return absl::OkStatus();
}

}  // namespace zephon::pipeline
