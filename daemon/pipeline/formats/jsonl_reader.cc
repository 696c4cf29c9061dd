#include "daemon/pipeline/formats/jsonl_reader.h"

#include <filesystem>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/json_scan.h"
#include "daemon/pipeline/formats/line_reader.h"
#include "daemon/pipeline/formats/token_cache_files.h"

namespace zephon::pipeline {
namespace fs = std::filesystem;
namespace {

constexpr char kJsonlCacheDomain[] = "zephon-jsonl-cache-v1";
constexpr char kTextCacheDomain[] = "zephon-text-cache-v1";
// Token arrays with a loss mask: another domain, so a masked cache (which adds .msk) is
// never confused with an unmasked one of the same file and field.
constexpr char kJsonlMaskCacheDomain[] = "zephon-jsonl-mask-cache-v1";

bool HasSuffix(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Converts the token arrays of `lines` into `writer` (see the header for the layout).
absl::Status ConvertTokenArrays(LineReader* lines, const std::string& path,
                                const std::string& field, const LossMaskSource& loss_mask,
                                CacheWriter* writer) {
  static_assert(kLineReadAheadBytes >= kJsonPaddingBytes, "lines are scanned in place");
  TokenArrayScanner scanner(field);
  std::optional<LossMaskScanner> masks;
  if (loss_mask.enabled()) masks.emplace(loss_mask);
  std::vector<uint8_t> mask;
  std::vector<int32_t> tokens;
  std::string_view line;
  size_t bom = 0;
  while (true) {
    ASSIGN_OR_RETURN(bool more, NextRecordLine(lines, &line, &bom));
    if (!more) break;
    tokens.clear();
    size_t at = 0;
    const absl::Status s = scanner.Scan(line, kLineReadAheadBytes, &tokens, &at);
    at += bom;
    if (!s.ok()) {
      return absl::DataLossError(absl::StrCat(path, ": line ", lines->line_number(),
                                              " (decompressed byte offset ",
                                              lines->line_offset() + at, "): ", s.message()));
    }
    if (masks.has_value()) {
      const absl::Status m = masks->Scan(line, tokens.size(), &mask);
      if (!m.ok()) {
        return absl::DataLossError(absl::StrCat(path, ": line ", lines->line_number(), ": ",
                                                m.message(), " (token field \"", field,
                                                "\")"));
      }
    }
    RETURN_IF_ERROR(
        writer->Add(tokens.data(), tokens.size(), masks.has_value() ? mask.data() : nullptr));
  }
  return absl::OkStatus();
}

// What a masked token-array cache key covers beyond the source: the token field, the
// mask field and its format.
std::string MaskedKeyBytes(const std::string& field, const LossMaskSource& loss_mask) {
  std::string bytes = field;
  bytes.push_back('\0');
  bytes += loss_mask.field;
  bytes.push_back('\0');
  bytes.push_back(static_cast<char>(loss_mask.format));
  return bytes;
}

JsonlShardOptions TokenArrayOptions(const std::string& field, const std::string& cache_dir,
                                    uint64_t max_line_bytes) {
  JsonlShardOptions options;
  options.field = field;
  options.cache_dir = cache_dir;
  options.max_line_bytes = max_line_bytes;
  return options;
}

// The option checks both Opens make before touching the source.
absl::Status CheckOptions(const std::string& name, const JsonlShardOptions& options) {
  if (options.text == nullptr && options.field.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": empty jsonl_field"));
  }
  if (options.cache_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": empty token cache directory"));
  }
  if (options.text != nullptr && options.loss_mask.enabled()) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, ": loss_mask_field reads a mask aligned with token ids, but this dataset is "
              "tokenized from text; mask text records with tokenize(loss_on=...) instead"));
  }
  if (options.text != nullptr) return ValidateTextTokenization(*options.text, name);
  return absl::OkStatus();
}

}  // namespace

bool IsJsonlFileName(std::string_view name) {
  return HasSuffix(name, ".jsonl") || HasSuffix(name, ".jsonl.gz") ||
         HasSuffix(name, ".jsonl.zst");
}

absl::StatusOr<std::unique_ptr<JsonlShard>> JsonlShard::Open(const std::string& path,
                                                             const JsonlShardOptions& options) {
  RETURN_IF_ERROR(CheckOptions(path, options));
  ASSIGN_OR_RETURN(SourceStat st, StatSource(path));
  std::error_code ec;
  const std::string abs_path = fs::absolute(path, ec).lexically_normal().string();
  if (ec) return absl::InternalError(absl::StrCat("cannot resolve ", path, ": ", ec.message()));
  const uint64_t max_line_bytes = options.max_line_bytes;
  return OpenSource(
      path, st.size, LocalSourceIdentity(abs_path, st), options,
      [&]() { return LineReader::Open(path, max_line_bytes); },
      [&]() -> absl::Status {
        ASSIGN_OR_RETURN(SourceStat after, StatSource(path));
        if (!(after == st)) {
          return absl::AbortedError(
              absl::StrCat(path, " changed while it was converted to a token cache; retry"));
        }
        return absl::OkStatus();
      });
}

absl::StatusOr<std::unique_ptr<JsonlShard>> JsonlShard::Open(std::unique_ptr<ShardFile> source,
                                                             const std::string& version,
                                                             const JsonlShardOptions& options) {
  const std::string url = source->path();
  RETURN_IF_ERROR(CheckOptions(url, options));
  const uint64_t size = source->size();
  const uint64_t max_line_bytes = options.max_line_bytes;
  return OpenSource(
      url, size, RemoteSourceIdentity(url, size, version), options,
      [&]() { return LineReader::Open(std::move(source), max_line_bytes); }, nullptr);
}

absl::StatusOr<std::unique_ptr<JsonlShard>> JsonlShard::Open(const std::string& path,
                                                             const std::string& field,
                                                             const std::string& cache_dir,
                                                             uint64_t max_line_bytes) {
  return Open(path, TokenArrayOptions(field, cache_dir, max_line_bytes));
}

absl::StatusOr<std::unique_ptr<JsonlShard>> JsonlShard::Open(std::unique_ptr<ShardFile> source,
                                                             const std::string& version,
                                                             const std::string& field,
                                                             const std::string& cache_dir,
                                                             uint64_t max_line_bytes) {
  return Open(std::move(source), version, TokenArrayOptions(field, cache_dir, max_line_bytes));
}

absl::StatusOr<std::unique_ptr<JsonlShard>> JsonlShard::OpenSource(
    const std::string& name, uint64_t source_bytes, const std::string& identity,
    const JsonlShardOptions& options,
    const std::function<absl::StatusOr<std::unique_ptr<LineReader>>()>& lines,
    const std::function<absl::Status()>& unchanged) {
  const TextTokenization* text = options.text;
  CacheSpec spec;
  spec.name = name;
  spec.source_bytes = source_bytes;
  spec.cache_dir = options.cache_dir;
  spec.key = text != nullptr ? CacheKey(kTextCacheDomain, identity, TextCacheKeyBytes(*text))
             : options.loss_mask.enabled()
                 ? CacheKey(kJsonlMaskCacheDomain, identity,
                            MaskedKeyBytes(options.field, options.loss_mask))
                 : CacheKey(kJsonlCacheDomain, identity, options.field);
  spec.with_stats = text != nullptr;
  spec.with_mask = text != nullptr ? TextHasLossMask(*text) : options.loss_mask.enabled();
  spec.with_payload = text != nullptr && text->keep_payload;
  spec.token_cache = options.token_cache;
  const auto convert = [&](CacheWriter* writer, TextShardStats* stats) -> absl::Status {
    ASSIGN_OR_RETURN(std::unique_ptr<LineReader> reader, lines());
    if (text != nullptr) {
      return ConvertText(reader.get(), name, *text, options.convert, writer, stats);
    }
    return ConvertTokenArrays(reader.get(), name, options.field, options.loss_mask, writer);
  };
  ASSIGN_OR_RETURN(Opened opened,
                   OpenCache(spec, convert, unchanged, /*log_conversion=*/text != nullptr));
  return std::unique_ptr<JsonlShard>(new JsonlShard(std::move(opened)));
}

}  // namespace zephon::pipeline
