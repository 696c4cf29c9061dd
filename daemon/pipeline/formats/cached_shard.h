// CachedShard: a shard served from the node's token cache (token_cache_files.h layout:
// <prefix>.tok, <prefix>.off, <prefix>.stats for conversions that count, <prefix>.msk
// for those that write loss masks). It is the
// part every converted format shares: JSONL (jsonl_reader.h) and the record formats
// (record_shard.h: Parquet, MDS). A format keys the cache (its own domain, the source
// identity, what it reads) and supplies the conversion; CachedShard::Open then
//   - pins the key in the node's TokenCache (budget, LRU) before touching the files,
//     and reports a hit or a build;
//   - opens a usable cache (.tok/.off consistent, and with `with_stats` a matching
//     .stats), or else converts it once per key in this process (ConversionFlights: a
//     second opener waits for the first and opens its result), into temporary files
//     committed by renaming (.tok, .stats, then .off), after `unchanged` confirms the
//     source did not change meanwhile;
//   - logs "tokenized <name>: ..." for a conversion with `log_conversion`.
// Errors: the conversion's, `unchanged`'s, cache I/O (INTERNAL / PERMISSION_DENIED naming
// the cache file), and INTERNAL for a cache inconsistent right after being written.
// Thread-safe after Open (immutable).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_CACHED_SHARD_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_CACHED_SHARD_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/shard_file.h"
#include "daemon/pipeline/formats/shard_reader.h"
#include "daemon/pipeline/formats/text_convert.h"
#include "daemon/pipeline/formats/token_cache.h"
#include "daemon/pipeline/formats/token_cache_files.h"

namespace zephon::pipeline {

class CachedShard : public ShardReader {
 public:
  // Which cache serves the shard.
  struct CacheSpec {
    std::string name;           // the source's path or URL: messages and FileName()
    uint64_t source_bytes = 0;  // the source's size: ByteSize()
    std::string cache_dir;      // created 0700 with parents before a conversion
    std::string key;            // the cache files are <cache_dir>/<key>.*
    bool with_stats = false;    // the conversion writes .stats; a cache needs it
    bool with_mask = false;     // the conversion writes .msk (loss masks); a cache needs it
    bool with_payload = false;  // the conversion writes .pay/.pao (keep_payload); a cache needs it
    TokenCache* token_cache = nullptr;  // may be null: unmanaged
  };
  // Converts the source into `writer` (not committed) and, with with_stats, sets
  // *stats' counts (persisted) and tokenized_bytes.
  using ConvertFn = std::function<absl::Status(CacheWriter* writer, TextShardStats* stats)>;

  std::string FileName() const override;  // the source's base name
  uint64_t ByteSize() const override { return source_bytes_; }
  uint64_t NumSamples() const override { return num_samples_; }
  uint64_t SampleLength(uint64_t index) const override;
  absl::Status CopyTokens(uint64_t index, uint64_t offset, uint64_t count,
                          int32_t* out) const override;
  // With with_mask: the cached mask (.msk); else all ones. Errors: DATA_LOSS naming the
  // cache file when it was shrunk or altered under the daemon.
  bool HasLossMask() const override { return msk_ != nullptr; }
  absl::Status CopyLossMask(uint64_t index, uint64_t offset, uint64_t count,
                            uint8_t* out) const override;
  // With with_payload: the sample's source record, a JSON object (.pay/.pao). Errors: DATA_LOSS naming the
  // cache file when it was shrunk under the daemon.
  bool HasPayload() const override { return pay_ != nullptr; }
  uint64_t PayloadBytes(uint64_t index) const override;
  absl::Status CopyPayload(uint64_t index, std::string* out) const override;
  // "<cache_dir>/<key>": the cache files are this plus ".tok" / ".off" (/ ".stats").
  const std::string& cache_prefix() const { return cache_prefix_; }
  // With with_stats: the conversion's counts (from .stats on a warm open) and whether
  // this open converted (then also its bytes and seconds); null otherwise.
  const TextShardStats* text_stats() const {
    return text_stats_.has_value() ? &*text_stats_ : nullptr;
  }

 protected:
  // The opened cache a subclass is constructed from.
  struct Opened {
    std::string name, prefix;
    uint64_t source_bytes = 0;
    std::unique_ptr<ShardFile> tok, off, msk;  // msk: with_mask only
    std::unique_ptr<ShardFile> pay, pao;       // with_payload only
    std::optional<TextShardStats> stats;
    TokenCache::Pin pin;
  };
  // See the file comment. `unchanged` may be null (a remote source: the shard cache
  // fails a replaced object).
  static absl::StatusOr<Opened> OpenCache(const CacheSpec& spec, const ConvertFn& convert,
                                          const std::function<absl::Status()>& unchanged,
                                          bool log_conversion);
  explicit CachedShard(Opened opened);

 private:
  uint64_t Offset(uint64_t i) const;

  const std::string name_;
  const uint64_t source_bytes_;
  const std::string cache_prefix_;
  const std::unique_ptr<ShardFile> tok_;
  const std::unique_ptr<ShardFile> off_;
  const std::unique_ptr<ShardFile> msk_;  // null without a mask
  const std::unique_ptr<ShardFile> pay_;  // null without payloads
  const std::unique_ptr<ShardFile> pao_;  // null without payloads
  const uint64_t num_samples_;
  const std::optional<TextShardStats> text_stats_;
  TokenCache::Pin pin_;  // held for the shard's life
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_CACHED_SHARD_H_
