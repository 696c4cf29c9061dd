#include "daemon/pipeline/formats/cached_shard.h"

#include <algorithm>
#include <filesystem>
#include <utility>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/tokens.h"

namespace zephon::pipeline {
namespace fs = std::filesystem;
namespace {

// The counts persisted at `prefix`, if present and consistent with the cache.
std::optional<TextShardStats> ReadStats(const std::string& prefix, const CachePair& cache) {
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

void LogConversion(const std::string& name, const TextShardStats& s) {
  spdlog::info("tokenized {}: {} records, {:.1f} MB read -> {} tokens in {:.3f} s "
               "({:.1f} MB/s){}",
               name, s.records, s.tokenized_bytes / 1e6, s.tokens, s.tokenize_seconds,
               s.tokenized_bytes / 1e6 / std::max(s.tokenize_seconds, 1e-9),
               s.null_records == 0 ? std::string()
                                   : absl::StrCat(", ", s.null_records, " null records skipped"));
}

}  // namespace

absl::StatusOr<CachedShard::Opened> CachedShard::OpenCache(
    const CacheSpec& spec, const ConvertFn& convert,
    const std::function<absl::Status()>& unchanged, bool log_conversion) {
  const std::string prefix = (fs::path(spec.cache_dir) / spec.key).string();
  // Pinned before the files are opened, so the budget never deletes them in between.
  TokenCache::Pin pin;
  if (spec.token_cache != nullptr) pin = spec.token_cache->Acquire(spec.key);
  std::optional<TextShardStats> stats;
  // A usable cache: both files consistent, and with_stats its matching .stats.
  const auto try_open = [&]() {
    CachePair cache = TryOpenCache(prefix, spec.with_mask, spec.with_payload);
    if (cache.tok != nullptr && spec.with_stats) {
      stats = ReadStats(prefix, cache);
      if (!stats.has_value()) cache = CachePair();
    }
    return cache;
  };
  TextShardStats converted;
  bool built = false;
  CachePair cache = try_open();
  if (cache.tok == nullptr) {
    // One conversion per key in this process; a waiter finds the winner's cache.
    ConversionFlights::Hold hold(&ConversionFlights::Global(), prefix);
    cache = try_open();
    if (cache.tok == nullptr) {
      RETURN_IF_ERROR(EnsureDir(spec.cache_dir));
      const absl::Time start = absl::Now();
      CacheWriter writer(prefix, spec.with_mask, spec.with_payload);
      RETURN_IF_ERROR(writer.Create());
      RETURN_IF_ERROR(convert(&writer, &converted));
      if (unchanged) RETURN_IF_ERROR(unchanged());
      std::vector<std::pair<std::string, std::string>> extra;
      if (spec.with_stats) extra.emplace_back(".stats", EncodeTextStats(converted));
      RETURN_IF_ERROR(writer.Commit(extra));
      converted.tokenize_seconds = absl::ToDoubleSeconds(absl::Now() - start);
      if (log_conversion) LogConversion(spec.name, converted);
      built = true;
      cache = try_open();
      if (cache.tok == nullptr) {
        return absl::InternalError(absl::StrCat("token cache ", prefix, ".{tok,off",
                                                spec.with_stats ? ",stats" : "",
                                                spec.with_mask ? ",msk" : "",
                                                spec.with_payload ? ",pay,pao" : "", "} for ",
                                                spec.name,
                                                " is inconsistent right after being written"));
      }
    }
  }
  if (built) {
    pin.Built();
  } else {
    pin.Hit();
  }
  if (built && stats.has_value()) {
    stats->tokenized = true;
    stats->tokenized_bytes = converted.tokenized_bytes;
    stats->tokenize_seconds = converted.tokenize_seconds;
  }
  Opened opened;
  opened.name = spec.name;
  opened.prefix = prefix;
  opened.source_bytes = spec.source_bytes;
  opened.tok = std::move(cache.tok);
  opened.off = std::move(cache.off);
  opened.msk = std::move(cache.msk);
  opened.pay = std::move(cache.pay);
  opened.pao = std::move(cache.pao);
  opened.stats = stats;
  opened.pin = std::move(pin);
  return opened;
}

CachedShard::CachedShard(Opened opened)
    : name_(std::move(opened.name)),
      source_bytes_(opened.source_bytes),
      cache_prefix_(std::move(opened.prefix)),
      tok_(std::move(opened.tok)),
      off_(std::move(opened.off)),
      msk_(std::move(opened.msk)),
      pay_(std::move(opened.pay)),
      pao_(std::move(opened.pao)),
      num_samples_(off_->size() / 8 - 1),
      text_stats_(opened.stats),
      pin_(std::move(opened.pin)) {}

std::string CachedShard::FileName() const { return fs::path(name_).filename().string(); }

uint64_t CachedShard::Offset(uint64_t i) const { return LoadU64(off_->data() + 8 * i); }

uint64_t CachedShard::SampleLength(uint64_t index) const {
  return Offset(index + 1) - Offset(index);
}

absl::Status CachedShard::CopyTokens(uint64_t index, uint64_t offset, uint64_t count,
                                     int32_t* out) const {
  return DecodeTokensAt(*tok_, 4 * (Offset(index) + offset), TokenType::kInt32, count, out);
}

absl::Status CachedShard::CopyLossMask(uint64_t index, uint64_t offset, uint64_t count,
                                       uint8_t* out) const {
  if (msk_ == nullptr) return ShardReader::CopyLossMask(index, offset, count, out);
  const absl::Status s =
      msk_->ReadAt(Offset(index) + offset, count, reinterpret_cast<char*>(out));
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("loss mask of ", name_, ": ", s.message()));
  }
  for (uint64_t i = 0; i < count; ++i) {
    if (out[i] > 1) {
      return absl::DataLossError(absl::StrCat("token cache ", cache_prefix_, ".msk for ", name_,
                                              " holds ", int{out[i]}, " at token ",
                                              Offset(index) + offset + i,
                                              " (not 0 or 1): delete it to rebuild"));
    }
  }
  return absl::OkStatus();
}

uint64_t CachedShard::PayloadBytes(uint64_t index) const {
  if (pao_ == nullptr) return 0;
  return LoadU64(pao_->data() + 8 * (index + 1)) - LoadU64(pao_->data() + 8 * index);
}

absl::Status CachedShard::CopyPayload(uint64_t index, std::string* out) const {
  if (pay_ == nullptr) return ShardReader::CopyPayload(index, out);
  const uint64_t begin = LoadU64(pao_->data() + 8 * index);
  const uint64_t end = LoadU64(pao_->data() + 8 * (index + 1));
  out->resize(end - begin);
  const absl::Status s = pay_->ReadAt(begin, end - begin, out->data());
  if (!s.ok()) {
    out->clear();
    return absl::Status(s.code(), absl::StrCat("payload of ", name_, ": ", s.message()));
  }
  return absl::OkStatus();
}

}  // namespace zephon::pipeline
