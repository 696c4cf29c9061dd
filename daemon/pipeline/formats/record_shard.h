// RecordShard: one shard of a record format (Parquet, MDS: record_formats.h), served
// from the node's token cache like a JSONL shard (cached_shard.h: pins, single flight,
// budget, the "tokenized ..." log line). The shard's RecordSource is opened and read
// front to back (record_convert.h) only when the cache for this exact file, checksum,
// field and options is missing; a warm open reads no source byte.
//
// Cache key: 16 hex digits of HashBytes("zephon-record-cache-v1\0" source identity
// (token_cache_files.h: path "\0" size mtime, or "remote\0" URL "\0" size version "\0")
// format "\0" checksum "\0" field "\0" u8 on_null, then "text\0" TextOptionBytes(*text)
// in text mode or "tokens" otherwise; with a loss mask "\0mask\0" mask field "\0" u8
// format is appended, so unmasked keys are unchanged). The checksum is the format's (a Parquet footer's,
// an MDS index entry's), so a file rewritten in place with the same size and mtime still
// gets a new key. Every conversion writes <key>.stats (text_convert.h counts, with
// null_records), in token mode too.
// Samples: one per non-null token record; in text mode what text_tokenization.h says.
// Thread-safe after Open (immutable).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_RECORD_SHARD_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_RECORD_SHARD_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/cached_shard.h"
#include "daemon/pipeline/formats/record_convert.h"
#include "daemon/pipeline/formats/record_source.h"
#include "daemon/pipeline/formats/text_tokenization.h"
#include "daemon/pipeline/formats/token_cache.h"

namespace zephon::pipeline {

struct RecordShardOptions {
  std::string format;         // the format's name (record_formats.h), part of the key
  std::string field;          // the column / field read (token mode; text: text->field)
  const TextTokenization* text = nullptr;  // text mode when set (must outlive Open)
  OnNull on_null = OnNull::kSkip;
  std::string cache_dir;
  TokenCache* token_cache = nullptr;  // may be null: unmanaged
  TextConvertOptions convert;         // the worker pool, block sizes, progress
  // Token mode: the column holding each record's loss mask (none when its field is
  // empty); the cache then holds <key>.msk.
  LossMaskSource loss_mask;
};

// Opens the shard's records (called at most once, on a cache miss).
using RecordSourceOpener = std::function<absl::StatusOr<std::unique_ptr<RecordSource>>()>;

class RecordShard final : public CachedShard {
 public:
  // `name` is the source's path or URL, `source_bytes` its size, `identity` its
  // LocalSourceIdentity / RemoteSourceIdentity, `checksum` the format's checksum of it.
  // `unchanged` (may be null) is called after a conversion: ABORTED when a local source
  // changed meanwhile. `open_mask` opens the loss-mask column's records (required with
  // options.loss_mask, called with `open` on a miss). `open_parts` open the text
  // columns of text->fields[1..] (prompt/completion; `open` reads fields[0]), one per
  // field, required then and called with `open` on a miss. REQUIRES: non-empty format,
  // cache_dir and field (or text with ValidateTextTokenization OK); INVALID_ARGUMENT
  // naming `name` otherwise.
  // Errors: the opener's and the conversion's (record_convert.h), cache I/O.
  static absl::StatusOr<std::unique_ptr<RecordShard>> Open(
      const std::string& name, uint64_t source_bytes, const std::string& identity,
      const std::string& checksum, const RecordShardOptions& options,
      const RecordSourceOpener& open, const std::function<absl::Status()>& unchanged,
      const RecordSourceOpener& open_mask = nullptr,
      const std::vector<RecordSourceOpener>& open_parts = {});

  // The key of the cache Open uses (exposed for tests and tools).
  static std::string Key(const std::string& identity, const std::string& checksum,
                         const RecordShardOptions& options);

 private:
  explicit RecordShard(Opened opened) : CachedShard(std::move(opened)) {}
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_RECORD_SHARD_H_
