// RecordSource: the records of one record-oriented shard (a Parquet file, an MDS
// shard), in order, each reduced to the one field the dataset reads. It is the seam
// between a format's decoder (parquet/, mds/) and the conversion into the node's token
// cache (the same cache and rules as JSONL: jsonl_reader.h), which makes every such
// shard random-access, restorable without decoding skipped records, and shared by the
// node's DP groups, runs and restarted daemons.
//
// A record's value is one of:
//   kText    a string (or binary) value: the text a `tokenize` operator encodes.
//   kTokens  a list of integer token ids, already checked to fit int32 (a value that
//            does not is an error naming the record, from the source).
//   kNull    no value (a null row, a null or missing field). The conversion skips and
//            counts it, or fails naming Where() (on_null="error").
// Which of kText / kTokens a source yields is fixed when it is opened (RecordField
// says what the dataset asked for); a column of the other kind fails the open naming
// the column, its type and the fix, before any record is read.
//
// Errors (from Open and Next) name the file and, for a bad record or page, Where():
// DATA_LOSS for corrupt or truncated data (bad magic, a footer past the file, a page
// that decompresses to the wrong size, an index out of range), INVALID_ARGUMENT for a
// field that is missing or of the wrong type, UNIMPLEMENTED naming the feature for a
// valid file using something not supported; never a crash or an out-of-bounds read.
// Thread-compatible: one thread reads a source at a time.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_RECORD_SOURCE_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_RECORD_SOURCE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace zephon::pipeline {

// What a dataset reads from each record.
struct RecordField {
  enum class Kind { kText, kTokens };
  Kind kind = Kind::kTokens;
  // The column (Parquet: a leaf or a LIST column; dotted paths reach struct fields,
  // "meta.text") or MDS column name.
  std::string name;
};

class RecordSource {
 public:
  struct Value {
    enum class Kind { kNull, kText, kTokens };
    Kind kind = Kind::kNull;
    std::string_view text;              // kText; valid until the next Next()
    absl::Span<const int32_t> tokens;   // kTokens; valid until the next Next()
  };

  virtual ~RecordSource() = default;

  // Reads the next record into *value: true, or false after the last one.
  virtual absl::StatusOr<bool> Next(Value* value) = 0;
  // Records in the shard when known before reading (a Parquet footer's num_rows, an MDS
  // index's samples); nullopt otherwise. Next() returns exactly this many when set.
  virtual std::optional<uint64_t> NumRecords() const = 0;
  // Where the record Next() returned last lives, for messages: the file and the
  // 0-based record index, plus what the format knows ("row group 3, page 7").
  virtual std::string Where() const = 0;
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_RECORD_SOURCE_H_
