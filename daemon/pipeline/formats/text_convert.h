// Text conversion: the lines of a JSONL text shard -> the samples of its token cache
// (text_tokenization.h says which samples a record yields; jsonl_reader.h the cache).
//
// Records are the non-blank lines (blank lines are skipped, a UTF-8 BOM before the
// first line is ignored). A line with invalid UTF-8 anywhere has each invalid sequence
// replaced by U+FFFD (as Python's bytes.decode("utf-8", errors="replace")) before it
// is parsed; an escaped unpaired surrogate in the text becomes U+FFFD (json_scan.h);
// either way the record is counted once in invalid_utf8_records. The field is read
// with StringFieldScanner; a missing or non-string field is DATA_LOSS naming the file,
// the 1-based line and the field (or, with skip_missing, a skipped, counted record).
// Prompt/completion (TextTokenization::fields): each field is read so, the record's
// fields are encoded one after another (BOS with the first, EOS with the last) and,
// with loss_on, each token's mask byte is written beside it (<key>.msk); truncation and
// splitting cut the mask with the ids.
//
// Parallel and ordered: the converting thread reads, parses and cuts the records into
// blocks of about kTextBlockBytes of text; blocks are tokenized by tasks handed to
// TextConvertOptions::submit and written strictly in order, with at most
// max_blocks_in_flight blocks between reading and writing (the memory bound). The
// converting thread runs a block it must write that no task has started itself: at once,
// or after a short grace while options.progress counts another conversion running
// (text_convert.cc: kPoolClaimGrace), so a busy, stopped or absent executor (submit null or returning
// false) only makes conversion slower, never stuck. Output is byte-identical however blocks
// are run. Tasks never wait on anything.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_TEXT_CONVERT_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_TEXT_CONVERT_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "daemon/pipeline/formats/conversion_progress.h"
#include "daemon/pipeline/formats/line_reader.h"
#include "daemon/pipeline/formats/text_tokenization.h"
#include "daemon/pipeline/formats/token_cache_files.h"

namespace zephon::pipeline {

// Runs `task` on an executor, or returns false when it cannot (then the caller runs it).
using SubmitFn = std::function<bool(std::function<void()>)>;

// 512 KiB: measured against 2 MiB and 8 MiB in alternating runs (64 MB of text, Llama 3),
// the smallest converted fastest at 1 and 2 worker threads (a shard's last blocks leave
// workers idle for less time).
inline constexpr size_t kTextBlockBytes = size_t{512} << 10;

struct TextConvertOptions {
  // The node's worker pool (zephond's --worker-threads). Null: tokenize inline.
  SubmitFn submit;
  // Blocks being tokenized or waiting to be written at once; about 2x the pool's
  // threads keeps them busy. Values below 1 count as 1.
  int max_blocks_in_flight = 8;
  // Text per block (the last record may overshoot it); never changes the output.
  size_t block_bytes = kTextBlockBytes;
  // The node's conversion counters (zephond reports them to waiting attaches): each
  // conversion Begins, Adds each block's text as it is written, and Ends. Null: none.
  ConversionProgress* progress = nullptr;
};

// What converting one text shard (or any record shard: record_convert.h) found. The
// counts are persisted with the cache (<key>.stats), so a warm open reports what the
// conversion did.
struct TextShardStats {
  uint64_t records = 0;  // non-blank lines / source records, skipped ones included
  uint64_t samples = 0;
  uint64_t tokens = 0;
  uint64_t invalid_utf8_records = 0;
  uint64_t skipped_missing = 0;
  uint64_t truncated_records = 0;  // kTruncate: records cut to max_length
  uint64_t split_records = 0;      // kSplit: records that became 2+ samples
  uint64_t null_records = 0;       // record formats, on_null skip: null records skipped
  // Not persisted: whether this open converted the shard (a cache miss), the
  // decompressed bytes it read (up to its last record) and how long it took.
  bool tokenized = false;
  uint64_t tokenized_bytes = 0;
  double tokenize_seconds = 0;

  // Adds the counts and the conversion figures of `other`; tokenized if either is.
  TextShardStats& operator+=(const TextShardStats& other);
  // The persisted counts are equal.
  bool SameCounts(const TextShardStats& other) const;
};

// OK when `text` can convert: a tokenizer, a non-empty field, max_length > 0 when
// long_samples is not kKeep, and the special tokens the tokenizer can add.
// INVALID_ARGUMENT / FAILED_PRECONDITION naming `what` (the shard or dataset).
absl::Status ValidateTextTokenization(const TextTokenization& text, const std::string& what);

// The bytes of `text` that change the samples: field "\0" tokenizer fingerprint "\0",
// u8 special_tokens, u64 LE max_length, u8 long_samples, u8 skip_missing, and only with
// `fields`: "\0fields\0", each field "\0", one u8 per loss_on flag. Text cache keys and
// the dataset fingerprint cover them.
std::string TextOptionBytes(const TextTokenization& text);
// What a text cache key covers: TextOptionBytes, then "\0keep_payload" when the cache
// also keeps the text (another set of files; the samples are the same).
std::string TextCacheKeyBytes(const TextTokenization& text);

// The persisted form of the counts and back; false when `bytes` is not such a record.
// "zephon-text-stats-v1\0" + the first 7 counts (u64 LE) when null_records is 0, so a
// JSONL cache's .stats stays byte-identical to earlier releases' (which stay valid);
// "zephon-text-stats-v2\0" + all 8 counts otherwise. Decode reads both.
std::string EncodeTextStats(const TextShardStats& stats);
bool DecodeTextStats(std::string_view bytes, TextShardStats* stats);

// Converts every record of `lines` into `writer` (not committed) and sets *stats'
// counts. `path` names the source in errors. REQUIRES: ValidateTextTokenization OK.
// Errors: DATA_LOSS for malformed lines and missing fields (file, line, offset),
// the reader's, Encode's (prefixed with the file and line), the writer's.
absl::Status ConvertText(LineReader* lines, const std::string& path,
                         const TextTokenization& text, const TextConvertOptions& options,
                         CacheWriter* writer, TextShardStats* stats);

struct TextBlock;  // text_convert.cc

// The parallel, ordered block converter (see the top of this file) that ConvertText
// and the record-format conversion (record_convert.h) feed: the caller adds records in
// order, dispatches a block when BlockFull, and calls Finish once. Each block written
// adds its samples, tokens, truncated and split records to *stats and its text bytes
// to options.progress. Errors: Encode's, prefixed "<path>: <unit> <number>: ", and the
// writer's; after an error the converter must not be used again.
// Thread-compatible (one converting thread); tasks it submits never block.
class TextBlockConverter {
 public:
  // `unit` names a record's number in errors ("line", "record"); a string literal.
  // All references must outlive the converter.
  TextBlockConverter(const std::string& path, const char* unit, const TextTokenization& text,
                     const TextConvertOptions& options, CacheWriter* writer,
                     TextShardStats* stats);
  ~TextBlockConverter();
  TextBlockConverter(const TextBlockConverter&) = delete;
  TextBlockConverter& operator=(const TextBlockConverter&) = delete;

  // Appends one record's text (copied) to the block being filled. `valid_utf8`: the
  // caller has checked it (tokenized with Tokenizer::EncodeValidUtf8); otherwise invalid
  // sequences are replaced as Encode does. With text.keep_payload, `payload` is the
  // record as a JSON object (valid UTF-8, copied), written beside each of its samples.
  void AddRecord(uint64_t number, std::string_view value, bool valid_utf8 = false,
                 std::string_view payload = {});
  // Appends one prompt/completion record: the values of text.fields in order (valid
  // UTF-8, copied), encoded one after another (BOS with the first, EOS with the last)
  // with each field's tokens masked per text.loss_on.
  void AddRecordParts(uint64_t number, const std::vector<std::string_view>& values);
  bool BlockFull() const;
  // Hands the filled block to the executor; writes the oldest blocks while too many
  // are in flight.
  absl::Status Dispatch();
  // Dispatches the last block and writes every block in flight.
  absl::Status Finish();

 private:
  absl::Status WriteOldest();

  const std::string& path_;
  const char* const unit_;
  const TextTokenization& text_;
  const TextConvertOptions& options_;
  CacheWriter* const writer_;
  TextShardStats* const stats_;
  const size_t max_in_flight_;
  std::shared_ptr<TextBlock> filling_;
  std::deque<std::shared_ptr<TextBlock>> in_flight_;
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_TEXT_CONVERT_H_
