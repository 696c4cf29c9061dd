// JsonlShard: one JSONL shard (.jsonl, .jsonl.gz, .jsonl.zst), served from a binary
// token cache because compressed text has no random access.
//
// Samples: sample i is the i-th non-blank line (blank = only spaces, tabs and CRs); its
// tokens are the integer array in field `field` (json_scan.h says what JSON is
// accepted). A UTF-8 byte order mark at the start of the file is ignored.
// Token cache, under cache_dir (created 0700 with parents when missing):
//   key = 16 hex digits of HashBytes("zephon-jsonl-cache-v1\0" absolute path "\0"
//         u64 LE size, u64 LE mtime_ns, field); an object-store source puts
//         "remote\0" URL "\0" u64 LE size, version (ETag) "\0" in place of path, size
//         and mtime, so an edited file or a replaced object gets a new key (stale caches
//         stay behind).
//   <key>.tok  int32 LE tokens of all samples back to back
//   <key>.off  u64 LE offsets, N + 1 of them, in tokens: sample i is [off[i], off[i+1])
// A missing or inconsistent cache is rebuilt into temporary files renamed into place
// (.tok, then .off, which commits), so concurrent openers never see a partial cache and
// may race harmlessly. .off is then held in memory, .tok read with pread per sample (a
// cache file shrunk under the daemon is DATA_LOSS, not a crash). A local source that
// changes during conversion is ABORTED; the shard cache fails a remote one.
// With a `token_cache` (token_cache.h; its directory must be cache_dir) the entry is
// pinned for the shard's lifetime and reported as a hit or a build, so the cache's budget
// evicts only entries no shard holds; null = unmanaged (no budget).
// Conversion reads lines of at most `max_line_bytes` (line_reader.h); an existing cache
// is used whatever limit it was built under.
// Errors name the source, the 1-based line and the decompressed byte offset: DATA_LOSS
// for malformed lines and corrupt streams, RESOURCE_EXHAUSTED for an overlong line,
// NOT_FOUND for a missing source, INTERNAL / PERMISSION_DENIED for cache I/O (naming the
// cache file).
// Thread-safe after Open (immutable).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_JSONL_READER_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_JSONL_READER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/line_reader.h"
#include "daemon/pipeline/formats/shard_file.h"
#include "daemon/pipeline/formats/shard_reader.h"
#include "daemon/pipeline/formats/token_cache.h"

namespace zephon::pipeline {

inline constexpr char kDefaultJsonlField[] = "input_ids";

// True for names ending in ".jsonl", ".jsonl.gz" or ".jsonl.zst".
bool IsJsonlFileName(std::string_view name);

class JsonlShard final : public ShardReader {
 public:
  // REQUIRES: `field` and `cache_dir` non-empty, max_line_bytes >= 1 (INVALID_ARGUMENT
  // otherwise).
  static absl::StatusOr<std::unique_ptr<JsonlShard>> Open(
      const std::string& path, const std::string& field, const std::string& cache_dir,
      uint64_t max_line_bytes = kDefaultMaxLineBytes, TokenCache* token_cache = nullptr);
  // The same for an object-store source: `source` is read front to back only when the
  // token cache for (source->path(), size, `version`, `field`) is missing. Errors also
  // include the storage's (naming the URL, bucket, key and HTTP status).
  static absl::StatusOr<std::unique_ptr<JsonlShard>> Open(
      std::unique_ptr<ShardFile> source, const std::string& version, const std::string& field,
      const std::string& cache_dir, uint64_t max_line_bytes = kDefaultMaxLineBytes,
      TokenCache* token_cache = nullptr);

  // The source file's base name and byte size (what the dataset fingerprint covers).
  std::string FileName() const override;
  uint64_t ByteSize() const override { return source_bytes_; }
  uint64_t NumSamples() const override { return num_samples_; }
  uint64_t SampleLength(uint64_t index) const override;
  absl::Status CopyTokens(uint64_t index, uint64_t offset, uint64_t count,
                          int32_t* out) const override;
  // "<cache_dir>/<key>": the cache files are this plus ".tok" / ".off".
  const std::string& cache_prefix() const { return cache_prefix_; }

 private:
  JsonlShard(std::string path, uint64_t source_bytes, std::string cache_prefix,
             std::unique_ptr<ShardFile> tok, std::unique_ptr<ShardFile> off);
  // Opens the cache at `prefix`, running `build` first when it is missing or broken;
  // pins it in `token_cache` (may be null) first.
  static absl::StatusOr<std::unique_ptr<JsonlShard>> OpenCached(
      const std::string& path, uint64_t source_bytes, const std::string& cache_dir,
      const std::string& prefix,
      const std::function<absl::Status()>& build, TokenCache* token_cache);
  uint64_t Offset(uint64_t i) const;

  const std::string path_;
  const uint64_t source_bytes_;
  const std::string cache_prefix_;
  const std::unique_ptr<ShardFile> tok_;
  const std::unique_ptr<ShardFile> off_;
  const uint64_t num_samples_;
  TokenCache::Pin pin_;  // set once by OpenCached
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_JSONL_READER_H_
