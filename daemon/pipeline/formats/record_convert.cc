#include "daemon/pipeline/formats/record_convert.h"

#include <simdjson.h>

#include <optional>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tokenizer/canonical_json.h"
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
  if (!options.parts.empty() &&
      (text == nullptr || text->fields.size() != options.parts.size() + 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": ", options.parts.size(), " part sources need text with ",
        options.parts.size() + 1, " tokenize fields"));
  }
  const RecordSource::Value::Kind want =
      text != nullptr ? RecordSource::Value::Kind::kText : RecordSource::Value::Kind::kTokens;
  std::optional<TextBlockConverter> converter;
  if (text != nullptr) converter.emplace(name, "record", *text, options.convert, writer, stats);
  const std::optional<uint64_t> declared = source->NumRecords();
  std::string repaired;
  std::string payload;  // keep_payload: the record as a JSON object
  RecordSource::Value value, mask_value;
  std::vector<int64_t> mask_numbers;
  std::vector<uint8_t> mask;
  // Prompt/completion: each part's value of the current record, and repaired copies.
  std::vector<RecordSource::Value> part_values(options.parts.size());
  std::vector<std::string> repaired_parts(options.parts.size() + 1);
  std::vector<std::string_view> texts;
  while (true) {
    ASSIGN_OR_RETURN(bool more, source->Next(&value));
    if (!more) break;
    // The source whose value is null and its field, for the on_null="error" message.
    RecordSource* null_in = value.kind == RecordSource::Value::Kind::kNull ? source : nullptr;
    size_t null_field = 0;
    for (size_t i = 0; i < options.parts.size(); ++i) {
      ASSIGN_OR_RETURN(bool has_part, options.parts[i]->Next(&part_values[i]));
      if (!has_part) {
        return absl::DataLossError(absl::StrCat(
            options.parts[i]->Where(), ": tokenize field ", i + 2, " ('", text->fields[i + 1],
            "') ends before the first (record ", stats->records, ")"));
      }
      // A null part makes the record null (counted or refused below, as on_null says).
      if (part_values[i].kind == RecordSource::Value::Kind::kNull) {
        if (null_in == nullptr) {
          null_in = options.parts[i];
          null_field = i + 1;
        }
        value.kind = RecordSource::Value::Kind::kNull;
      } else if (part_values[i].kind != RecordSource::Value::Kind::kText) {
        return absl::InternalError(absl::StrCat(options.parts[i]->Where(),
                                                ": the source yielded ",
                                                KindName(part_values[i].kind),
                                                " where text was asked for"));
      }
    }
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
        const std::string which =
            text != nullptr && !text->fields.empty()
                ? absl::StrCat("field '", text->fields[null_field], "'")
                : std::string("the field");
        return absl::InvalidArgumentError(absl::StrCat(
            null_in->Where(), ": ", which, " is null; fix the data, or pass on_null=\"skip\" "
            "to skip (and count) null records"));
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
    if (!text->fields.empty()) {
      // Every field as valid UTF-8 (AddRecordParts' contract), repaired where needed.
      texts.assign({value.text});
      for (const RecordSource::Value& part : part_values) texts.push_back(part.text);
      bool invalid = false;
      for (size_t i = 0; i < texts.size(); ++i) {
        stats->tokenized_bytes += texts[i].size();
        if (!simdjson::validate_utf8(texts[i].data(), texts[i].size())) {
          repaired_parts[i] = tokenizer::ReplaceInvalidUtf8(texts[i]);
          texts[i] = repaired_parts[i];
          invalid = true;
        }
      }
      stats->invalid_utf8_records += invalid ? 1 : 0;
      converter->AddRecordParts(number, texts);
      if (converter->BlockFull()) RETURN_IF_ERROR(converter->Dispatch());
      continue;
    }
    std::string_view record = value.text;
    stats->tokenized_bytes += record.size();
    if (!simdjson::validate_utf8(record.data(), record.size())) {
      repaired = tokenizer::ReplaceInvalidUtf8(record);
      record = repaired;
      ++stats->invalid_utf8_records;
    }
    if (text->keep_payload) {
      // A record format's payload: the tokenized column as {"<field>": text}.
      payload.assign("{");
      tokenizer::AppendJsonString(text->field, &payload);
      payload.push_back(':');
      tokenizer::AppendJsonString(record, &payload);
      payload.push_back('}');
    }
    converter->AddRecord(number, record, /*valid_utf8=*/false, payload);
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
