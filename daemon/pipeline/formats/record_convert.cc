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
  RecordSource::Value value;
  while (true) {
    ASSIGN_OR_RETURN(bool more, source->Next(&value));
    if (!more) break;
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
    if (text == nullptr) {
      RETURN_IF_ERROR(writer->Add(value.tokens.data(), value.tokens.size()));
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
