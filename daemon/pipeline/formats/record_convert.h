// Record conversion: the records of a RecordSource (record_source.h: a Parquet file, an
// MDS shard) -> the samples of its token cache, the same cache JSONL shards use
// (token_cache_files.h; record_shard.h keys and opens it).
//
// Text records (RecordConvertOptions::text set) go through the same parallel, ordered
// block converter as JSONL text (text_convert.h: TextBlockConverter), so one record
// yields the samples text_tokenization.h says; invalid UTF-8 is replaced by U+FFFD and
// counted in invalid_utf8_records, as for JSONL. Token records (text null) are written
// as they come, one sample each. A null record (RecordSource::Value::kNull) is skipped
// and counted in null_records (OnNull::kSkip), or INVALID_ARGUMENT naming the source's
// Where() and the fix (OnNull::kError). Every record, null or not, counts in `records`.
// A source that yields a value of the other kind (text when tokens were asked, or the
// reverse) is INTERNAL naming Where(); a source whose NumRecords() is set and disagrees
// with what Next() returned is DATA_LOSS naming `name` and both counts.
// Thread-compatible; text blocks run on options.convert.submit's executor.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_RECORD_CONVERT_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_RECORD_CONVERT_H_

#include <string>
#include <vector>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/loss_mask.h"
#include "daemon/pipeline/formats/record_source.h"
#include "daemon/pipeline/formats/text_convert.h"
#include "daemon/pipeline/formats/text_tokenization.h"
#include "daemon/pipeline/formats/token_cache_files.h"

namespace zephon::pipeline {

// What a record format does with a null record (the dataset's on_null).
enum class OnNull { kSkip, kError };

// "skip" / "error" and back (INVALID_ARGUMENT naming the accepted values).
std::string_view OnNullName(OnNull on_null);
absl::StatusOr<OnNull> ParseOnNull(std::string_view name);

struct RecordConvertOptions {
  // Text records when set (must outlive the conversion; ValidateTextTokenization OK):
  // each is tokenized. Null: token-id records.
  const TextTokenization* text = nullptr;
  OnNull on_null = OnNull::kSkip;
  // The executor, block sizes and progress counters of the text conversion; token
  // conversions report their progress too (4 bytes a token).
  TextConvertOptions convert;
  // Token records only: the same shard's loss-mask column (loss_mask.h), read in
  // lockstep with `source` (a list of 0/1 per record, or with kSpans the flat
  // [start, end) pairs); the writer then takes each sample's mask. A mask that is null
  // where the tokens are not, or fails MaskFromValues / MaskFromSpans, is
  // INVALID_ARGUMENT naming the mask source's Where() and both lengths.
  RecordSource* mask = nullptr;
  LossMaskFormat mask_format = LossMaskFormat::kValues;
  // Text records with text->fields (prompt/completion): the sources of fields[1..],
  // read in lockstep with `source` (which reads fields[0]); a record's values are
  // encoded one after another (TextBlockConverter::AddRecordParts: BOS with the first,
  // EOS with the last, each field's tokens masked per text->loss_on). A record null in
  // any of its fields is a null record (on_null). A part that ends before `source` is
  // DATA_LOSS naming it; one that is not text is INTERNAL (the opener asked for text).
  // Parts without text holding parts.size() + 1 fields are INVALID_ARGUMENT.
  std::vector<RecordSource*> parts;
};

// Converts every record of `source` into `writer` (not committed) and sets *stats'
// counts and tokenized_bytes (the text or token bytes read). `name` names the shard
// in errors. Errors: the source's, the ones above, Encode's (prefixed with `name` and
// the 0-based record number), the writer's.
absl::Status ConvertRecords(RecordSource* source, const std::string& name,
                            const RecordConvertOptions& options, CacheWriter* writer,
                            TextShardStats* stats);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_RECORD_CONVERT_H_
