#include "daemon/pipeline/formats/jsonl_reader.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/json_scan.h"
#include "daemon/pipeline/formats/line_reader.h"
#include "daemon/pipeline/formats/token_cache_files.h"
#include "daemon/pipeline/formats/tokens.h"

namespace zephon::pipeline {
namespace fs = std::filesystem;
namespace {

constexpr char kJsonlCacheDomain[] = "zephon-jsonl-cache-v1";
constexpr char kTextCacheDomain[] = "zephon-text-cache-v1";

bool HasSuffix(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// Converts the token arrays of `lines` into `writer` (see the header for the layout).
absl::Status ConvertTokenArrays(LineReader* lines, const std::string& path,
                                const std::string& field, CacheWriter* writer) {
  static_assert(kLineReadAheadBytes >= kJsonPaddingBytes, "lines are scanned in place");
  TokenArrayScanner scanner(field);
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
    RETURN_IF_ERROR(writer->Add(tokens.data(), tokens.size()));
  }
  return absl::OkStatus();
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
  if (options.text != nullptr) return ValidateTextTokenization(*options.text, name);
  return absl::OkStatus();
}

// The text counts persisted at `prefix`, if present and consistent with the cache.
std::optional<TextShardStats> ReadTextStats(const std::string& prefix, const CachePair& cache) {
  auto file = OpenLocalShardFile(prefix + ".stats");
  if (!file.ok()) return std::nullopt;
  auto resident = MakeResident(*std::move(file));
  TextShardStats stats;
  if (!resident.ok() ||
      !DecodeTextStats(std::string_view((*resident)->data(), (*resident)->size()), &stats) ||
      stats.samples != cache.off->size() / 8 - 1 || stats.tokens != cache.tok->size() / 4) {
    return std::nullopt;
  }
  return stats;
}

}  // namespace

bool IsJsonlFileName(std::string_view name) {
  return HasSuffix(name, ".jsonl") || HasSuffix(name, ".jsonl.gz") ||
         HasSuffix(name, ".jsonl.zst");
}

JsonlShard::JsonlShard(std::string path, uint64_t source_bytes, std::string cache_prefix,
                       std::unique_ptr<ShardFile> tok, std::unique_ptr<ShardFile> off)
    : path_(std::move(path)),
      source_bytes_(source_bytes),
      cache_prefix_(std::move(cache_prefix)),
      tok_(std::move(tok)),
      off_(std::move(off)),
      num_samples_(off_->size() / 8 - 1) {}

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
  const std::string key = text != nullptr
                              ? CacheKey(kTextCacheDomain, identity, TextOptionBytes(*text))
                              : CacheKey(kJsonlCacheDomain, identity, options.field);
  const std::string prefix = (fs::path(options.cache_dir) / key).string();
  TextShardStats converted;
  const auto build = [&]() -> absl::Status {
    const absl::Time start = absl::Now();
    ASSIGN_OR_RETURN(std::unique_ptr<LineReader> reader, lines());
    CacheWriter writer(prefix);
    RETURN_IF_ERROR(writer.Create());
    std::vector<std::pair<std::string, std::string>> extra;
    if (text != nullptr) {
      RETURN_IF_ERROR(
          ConvertText(reader.get(), name, *text, options.convert, &writer, &converted));
      extra.emplace_back(".stats", EncodeTextStats(converted));
    } else {
      RETURN_IF_ERROR(ConvertTokenArrays(reader.get(), name, options.field, &writer));
    }
    if (unchanged) RETURN_IF_ERROR(unchanged());
    RETURN_IF_ERROR(writer.Commit(extra));
    converted.tokenize_seconds = absl::ToDoubleSeconds(absl::Now() - start);
    if (text != nullptr) {
      spdlog::info("tokenized {}: {} records, {:.1f} MB read -> {} tokens in {:.3f} s "
                   "({:.1f} MB/s)",
                   name, converted.records, converted.tokenized_bytes / 1e6, converted.tokens,
                   converted.tokenize_seconds,
                   converted.tokenized_bytes / 1e6 / std::max(converted.tokenize_seconds, 1e-9));
    }
    return absl::OkStatus();
  };
  bool built = false;
  ASSIGN_OR_RETURN(std::unique_ptr<JsonlShard> shard,
                   OpenCached(name, source_bytes, options.cache_dir, prefix, text != nullptr,
                              build, options.token_cache, &built));
  if (text != nullptr && built) {
    shard->text_stats_->tokenized = true;
    shard->text_stats_->tokenized_bytes = converted.tokenized_bytes;
    shard->text_stats_->tokenize_seconds = converted.tokenize_seconds;
  }
  return shard;
}

absl::StatusOr<std::unique_ptr<JsonlShard>> JsonlShard::OpenCached(
    const std::string& path, uint64_t source_bytes, const std::string& cache_dir,
    const std::string& prefix, bool text, const std::function<absl::Status()>& build,
    TokenCache* token_cache, bool* built) {
  *built = false;
  // Pinned before the files are opened, so the budget never deletes them in between.
  TokenCache::Pin pin;
  if (token_cache != nullptr) pin = token_cache->Acquire(fs::path(prefix).filename().string());
  std::optional<TextShardStats> stats;
  // A usable cache: both files consistent, and in text mode its matching .stats.
  const auto try_open = [&]() {
    CachePair cache = TryOpenCache(prefix);
    if (cache.tok != nullptr && text) {
      stats = ReadTextStats(prefix, cache);
      if (!stats.has_value()) cache = CachePair();
    }
    return cache;
  };
  CachePair cache = try_open();
  if (cache.tok == nullptr) {
    // One conversion per key in this process; a waiter finds the winner's cache.
    ConversionFlights::Hold hold(&ConversionFlights::Global(), prefix);
    cache = try_open();
    if (cache.tok == nullptr) {
      RETURN_IF_ERROR(EnsureDir(cache_dir));
      RETURN_IF_ERROR(build());
      *built = true;
      cache = try_open();
      if (cache.tok == nullptr) {
        return absl::InternalError(absl::StrCat("token cache ", prefix, ".{tok,off",
                                                text ? ",stats" : "", "} for ", path,
                                                " is inconsistent right after being written"));
      }
    }
  }
  if (*built) {
    pin.Built();
  } else {
    pin.Hit();
  }
  std::unique_ptr<JsonlShard> shard(new JsonlShard(path, source_bytes, prefix,
                                                   std::move(cache.tok), std::move(cache.off)));
  shard->text_stats_ = stats;
  shard->pin_ = std::move(pin);
  return shard;
}

std::string JsonlShard::FileName() const { return fs::path(path_).filename().string(); }

uint64_t JsonlShard::Offset(uint64_t i) const { return LoadU64(off_->data() + 8 * i); }

uint64_t JsonlShard::SampleLength(uint64_t index) const {
  return Offset(index + 1) - Offset(index);
}

absl::Status JsonlShard::CopyTokens(uint64_t index, uint64_t offset, uint64_t count,
                                    int32_t* out) const {
  return DecodeTokensAt(*tok_, 4 * (Offset(index) + offset), TokenType::kInt32, count, out);
}

}  // namespace zephon::pipeline
