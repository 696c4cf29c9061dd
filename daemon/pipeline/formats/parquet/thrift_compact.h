// ThriftCompactReader: a cursor over Thrift compact-protocol bytes, the encoding of a
// Parquet footer and page headers. Only what Parquet metadata uses: varints, zigzag
// integers, field headers with id deltas, bools, i8/i16/i32/i64, double, binary,
// list/set, map and struct, and skipping any field a caller does not read.
//
// The bytes are untrusted: every length is checked against the bytes left, a varint
// longer than its type allows is an error, and structs and containers nest at most
// kMaxDepth deep. Errors are DATA_LOSS and name what was being read; callers prefix
// the file and the structure (the footer, a page header).
// Thread-compatible; the reader does not own the bytes.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_THRIFT_COMPACT_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_THRIFT_COMPACT_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zephon::pipeline::parquet {

// Compact-protocol type ids (the low nibble of a field header).
enum class ThriftType : uint8_t {
  kStop = 0,
  kBoolTrue = 1,
  kBoolFalse = 2,
  kByte = 3,
  kI16 = 4,
  kI32 = 5,
  kI64 = 6,
  kDouble = 7,
  kBinary = 8,
  kList = 9,
  kSet = 10,
  kMap = 11,
  kStruct = 12,
};

class ThriftCompactReader {
 public:
  // Structs and containers nested deeper than this are refused (a crafted footer
  // cannot recurse the stack away); Parquet's own metadata nests at most ~6 deep.
  static constexpr int kMaxDepth = 32;

  explicit ThriftCompactReader(std::string_view bytes) : bytes_(bytes) {}

  // Bytes consumed so far (a page header's length).
  size_t position() const { return pos_; }

  // Struct framing: BeginStruct before a struct's fields, then ReadFieldHeader until it
  // returns false (the stop field), then EndStruct.
  absl::Status BeginStruct();
  void EndStruct();
  // The next field's id and type; false at the struct's stop field. A bool field's
  // value is its type (kBoolTrue / kBoolFalse): read it with FieldBool.
  absl::StatusOr<bool> ReadFieldHeader(int16_t* id, ThriftType* type);
  static bool FieldBool(ThriftType type) { return type == ThriftType::kBoolTrue; }

  absl::StatusOr<int32_t> ReadI32();
  absl::StatusOr<int64_t> ReadI64();
  // A binary/string value: a view into the bytes, valid while they are.
  absl::StatusOr<std::string_view> ReadBinary();
  // A list or set header: its element type and size (checked against the bytes left,
  // each element taking at least one byte, bools excepted, which take one byte too).
  absl::Status ReadListHeader(ThriftType* element, uint32_t* size);

  // Skips one value of `type` (a whole struct or container, recursively).
  absl::Status Skip(ThriftType type);

 private:
  absl::StatusOr<uint64_t> ReadVarint(int max_bytes);
  absl::StatusOr<uint8_t> ReadByte();
  absl::Status Enter();
  // Skips one element of a list, set or map.
  absl::Status SkipElement(ThriftType type);

  std::string_view bytes_;
  size_t pos_ = 0;
  int depth_ = 0;
  // Field id of the previous field of each open struct (ids are sent as deltas).
  int16_t last_id_[kMaxDepth + 1] = {};
};

}  // namespace zephon::pipeline::parquet

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_THRIFT_COMPACT_H_
