// JsonlShard: one JSONL shard (.jsonl, .jsonl.gz, .jsonl.zst), served from a binary
// token cache because compressed text has no random access.
//
// Samples (token-array mode): sample i is the i-th non-blank line (blank = only spaces,
// tabs and CRs); its tokens are the integer array in field `field` (json_scan.h says
// what JSON is accepted). A UTF-8 byte order mark at the start of the file is ignored.
// Text mode (JsonlShardOptions::text set): each non-blank line's string field
// text->field is tokenized into one or more samples (text_tokenization.h, and
// text_convert.h for invalid UTF-8, missing fields and the parallel conversion).
// Token cache, under cache_dir (created 0700 with parents when missing):
//   key = 16 hex digits of HashBytes("zephon-jsonl-cache-v1\0" absolute path "\0"
//         u64 LE size, u64 LE mtime_ns, field); an object-store source puts
//         "remote\0" URL "\0" u64 LE size, version (ETag) "\0" in place of path, size
//         and mtime, so an edited file or a replaced object gets a new key (stale caches
//         stay behind).
//   <key>.tok  int32 LE tokens of all samples back to back
//   <key>.off  u64 LE offsets, N + 1 of them, in tokens: sample i is [off[i], off[i+1])
// With a loss mask (JsonlShardOptions::loss_mask) the key's domain is
// "zephon-jsonl-mask-cache-v1" and its rest field "\0" mask field "\0" u8 format, and
//   <key>.msk  one byte (0 or 1) per token of .tok, committed before .off.
// A line whose mask is missing, malformed or of another length than its tokens is
// DATA_LOSS naming the file, the line and both lengths (loss_mask.h).
// Text mode with TextTokenization::loss_on adds <key>.msk (its key covers fields and
// loss_on through TextOptionBytes). Text mode keys its caches in another domain: HashBytes("zephon-text-cache-v1\0"
// source identity (as above: path "\0" size mtime, or "remote\0" URL "\0" size
// version "\0") TextOptionBytes(*text)) (field, tokenizer fingerprint, special_tokens,
// max_length, long_samples, skip_missing), and adds
//   <key>.stats  the conversion's counts (text_convert.h), committed before .off.
// Two threads of one process opening one missing cache convert it once: the second
// waits for the first and opens its result (or converts itself if the first failed).
// A missing or inconsistent cache is rebuilt into temporary files renamed into place
// (.tok, then .off, which commits), so concurrent openers never see a partial cache and
// may race harmlessly. .off is then held in memory, .tok read with pread per sample (a
// cache file shrunk under the daemon is DATA_LOSS, not a crash). A local source that
// changes during conversion is ABORTED; the shard cache fails a remote one.
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
#include "daemon/pipeline/formats/cached_shard.h"
#include "daemon/pipeline/formats/line_reader.h"
#include "daemon/pipeline/formats/loss_mask.h"
#include "daemon/pipeline/formats/shard_file.h"
#include "daemon/pipeline/formats/text_convert.h"
#include "daemon/pipeline/formats/text_tokenization.h"
#include "daemon/pipeline/formats/token_cache.h"

namespace zephon::pipeline {

inline constexpr char kDefaultJsonlField[] = "input_ids";

// True for names ending in ".jsonl", ".jsonl.gz" or ".jsonl.zst".
bool IsJsonlFileName(std::string_view name);

// How a JSONL shard is read and converted.
struct JsonlShardOptions {
  // Token-array mode: the field holding the ids (unused in text mode).
  std::string field = kDefaultJsonlField;
  std::string cache_dir;
  // The node's token cache budget managing cache_dir (may be null: unmanaged). The
  // shard pins its entry for its whole life and reports a hit or a build.
  TokenCache* token_cache = nullptr;
  uint64_t max_line_bytes = kDefaultMaxLineBytes;
  // Text mode when set (must outlive Open): text->field is tokenized.
  const TextTokenization* text = nullptr;
  // Text mode: where blocks are tokenized.
  TextConvertOptions convert;
  // Token-array mode: the field holding each line's loss mask (loss_mask.h); none when
  // its field is empty. Refused in text mode (text masks come from text->loss_on).
  LossMaskSource loss_mask;
};

class JsonlShard final : public CachedShard {
 public:
  // REQUIRES: `cache_dir` non-empty, max_line_bytes >= 1, a non-empty `field` in
  // token-array mode, ValidateTextTokenization in text mode (errors otherwise).
  static absl::StatusOr<std::unique_ptr<JsonlShard>> Open(const std::string& path,
                                                          const JsonlShardOptions& options);
  // The same for an object-store source: `source` is read front to back only when the
  // token cache for (source->path(), size, `version`, field or text) is missing. Errors
  // also include the storage's (naming the URL, bucket, key and HTTP status).
  static absl::StatusOr<std::unique_ptr<JsonlShard>> Open(std::unique_ptr<ShardFile> source,
                                                          const std::string& version,
                                                          const JsonlShardOptions& options);
  // Token-array mode shorthands.
  static absl::StatusOr<std::unique_ptr<JsonlShard>> Open(
      const std::string& path, const std::string& field, const std::string& cache_dir,
      uint64_t max_line_bytes = kDefaultMaxLineBytes);
  static absl::StatusOr<std::unique_ptr<JsonlShard>> Open(
      std::unique_ptr<ShardFile> source, const std::string& version, const std::string& field,
      const std::string& cache_dir, uint64_t max_line_bytes = kDefaultMaxLineBytes);

  // FileName() and ByteSize() are the source file's base name and byte size (what the
  // dataset fingerprint covers); text_stats() is null in token-array mode.

 private:
  explicit JsonlShard(Opened opened) : CachedShard(std::move(opened)) {}
  // Both Opens: checks the options, keys the cache and converts `lines()` on a miss.
  static absl::StatusOr<std::unique_ptr<JsonlShard>> OpenSource(
      const std::string& name, uint64_t source_bytes, const std::string& identity,
      const JsonlShardOptions& options,
      const std::function<absl::StatusOr<std::unique_ptr<LineReader>>()>& lines,
      const std::function<absl::Status()>& unchanged);
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_JSONL_READER_H_
