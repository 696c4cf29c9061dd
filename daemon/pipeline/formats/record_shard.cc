#include "daemon/pipeline/formats/record_shard.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/token_cache_files.h"

namespace zephon::pipeline {
namespace {

constexpr char kRecordCacheDomain[] = "zephon-record-cache-v1";

}  // namespace

std::string RecordShard::Key(const std::string& identity, const std::string& checksum,
                             const RecordShardOptions& options) {
  std::string rest = options.format;
  rest.push_back('\0');
  rest += checksum;
  rest.push_back('\0');
  rest += options.text != nullptr ? options.text->field : options.field;
  rest.push_back('\0');
  rest.push_back(static_cast<char>(options.on_null));
  if (options.text != nullptr) {
    rest += std::string("text\0", 5);
    rest += TextCacheKeyBytes(*options.text);
  } else {
    rest += "tokens";
  }
  if (options.loss_mask.enabled()) {
    rest += std::string("\0mask\0", 6);
    rest += options.loss_mask.field;
    rest.push_back('\0');
    rest.push_back(static_cast<char>(options.loss_mask.format));
  }
  return CacheKey(kRecordCacheDomain, identity, rest);
}

absl::StatusOr<std::unique_ptr<RecordShard>> RecordShard::Open(
    const std::string& name, uint64_t source_bytes, const std::string& identity,
    const std::string& checksum, const RecordShardOptions& options,
    const RecordSourceOpener& open, const std::function<absl::Status()>& unchanged,
    const RecordSourceOpener& open_mask, const std::vector<RecordSourceOpener>& open_parts) {
  if (options.format.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": record shard without a format"));
  }
  if (options.cache_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": empty token cache directory"));
  }
  if (options.text != nullptr) {
    RETURN_IF_ERROR(ValidateTextTokenization(*options.text, name));
  } else if (options.field.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": empty field; name the ", options.format, " column holding the token ids"));
  }
  if (options.loss_mask.enabled() && (options.text != nullptr || !open_mask)) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": a loss mask column needs token mode and an opener for it"));
  }
  const size_t parts = options.text != nullptr && !options.text->fields.empty()
                           ? options.text->fields.size() - 1
                           : 0;
  if (open_parts.size() != parts) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": ", open_parts.size(),
                                                   " openers for the ", parts,
                                                   " tokenize fields after the first"));
  }
  CacheSpec spec;
  spec.name = name;
  spec.source_bytes = source_bytes;
  spec.cache_dir = options.cache_dir;
  spec.key = Key(identity, checksum, options);
  spec.with_stats = true;
  spec.with_mask = options.loss_mask.enabled() ||
                   (options.text != nullptr && TextHasLossMask(*options.text));
  spec.with_payload = options.text != nullptr && options.text->keep_payload;
  spec.token_cache = options.token_cache;
  RecordConvertOptions convert;
  convert.text = options.text;
  convert.on_null = options.on_null;
  convert.convert = options.convert;
  const auto run = [&](CacheWriter* writer, TextShardStats* stats) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<RecordSource> source, open());
    std::unique_ptr<RecordSource> mask;
    RecordConvertOptions with_mask = convert;
    if (options.loss_mask.enabled()) {
      ASSIGN_OR_RETURN(mask, open_mask());
      with_mask.mask = mask.get();
      with_mask.mask_format = options.loss_mask.format;
    }
    std::vector<std::unique_ptr<RecordSource>> part_sources;
    for (const RecordSourceOpener& open_part : open_parts) {
      ASSIGN_OR_RETURN(std::unique_ptr<RecordSource> part, open_part());
      with_mask.parts.push_back(part.get());
      part_sources.push_back(std::move(part));
    }
    return ConvertRecords(source.get(), name, with_mask, writer, stats);
  };
  ASSIGN_OR_RETURN(Opened opened, OpenCache(spec, run, unchanged, /*log_conversion=*/true));
  return std::unique_ptr<RecordShard>(new RecordShard(std::move(opened)));
}

}  // namespace zephon::pipeline
