// MdsEncoding: one MDS column's encoding as MosaicML Streaming names it
// (streaming/base/format/mds/encodings.py), and the decoding of a column value into
// what a dataset reads: text (str, bytes) or token ids (ndarray of an integer dtype).
//
// Encodings and their byte layout, as Streaming's writer lays them out:
//   str            UTF-8 text.                         bytes   raw bytes.
//   int            int64, little-endian (8 bytes).
//   uint8..uint64, int8..int64, float16/32/64         one little-endian scalar.
//   ndarray[:DTYPE[:D1,D2,...]]  a NumPy array. Without DTYPE each value starts with a
//                  dtype byte (8 uint8, 9 int8, 16 uint16, 17 int16, 18 float16,
//                  32 uint32, 33 int32, 34 float32, 64 uint64, 65 int64, 66 float64);
//                  without a shape it then has a byte (ndim << 2 | k) and ndim dims of
//                  2^k bytes each (uint8..uint64). The elements follow in C order.
//                  With both DTYPE and shape the column has a fixed size.
//   str_int, str_float, str_decimal, pil, jpeg, png, jpeg_array, jpegarray, list[pil],
//   list[jpeg], list[png], pkl, json: known, never read as text or tokens (refused).
// Anything else is UNIMPLEMENTED naming the encoding.
// Thread-safety: value types and pure functions.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_ENCODING_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_ENCODING_H_

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zephon::pipeline::mds {

// NumPy dtypes an MDS ndarray or scalar column may hold.
enum class MdsDtype {
  kUint8, kInt8, kUint16, kInt16, kFloat16, kUint32, kInt32, kFloat32, kUint64, kInt64,
  kFloat64,
};

// The dtype named `name` ("uint16"), or nullopt.
std::optional<MdsDtype> MdsDtypeFromName(absl::string_view name);
absl::string_view MdsDtypeName(MdsDtype dtype);
size_t MdsDtypeBytes(MdsDtype dtype);
bool MdsDtypeIsInteger(MdsDtype dtype);

struct MdsEncoding {
  enum class Kind {
    kStr,
    kBytes,
    kScalar,   // int (as int64) and the fixed-width scalars; `dtype` says which
    kNdarray,  // `dtype` and `shape` when the encoding fixes them
    kOther,    // known to Streaming, not readable as text or tokens
  };
  Kind kind = Kind::kOther;
  std::string text;  // as written in the index ("ndarray:uint16")
  std::optional<MdsDtype> dtype;
  std::optional<std::vector<uint64_t>> shape;

  // The encoded size of every value when the encoding fixes it (scalars; ndarray with
  // dtype and shape), as Streaming's get_mds_encoded_size; nullopt when variable.
  std::optional<uint64_t> FixedSize() const;
};

// Parses an encoding name; UNIMPLEMENTED naming it when Streaming has no such encoding,
// INVALID_ARGUMENT for a malformed ndarray form ("ndarray:uint16:0").
absl::StatusOr<MdsEncoding> ParseMdsEncoding(absl::string_view text);

// Decodes one ndarray value of an integer dtype into *out (cleared first), flattened in
// C order. INVALID_ARGUMENT for a float dtype or a value outside [0, 2^31) (naming the
// value and its element; token ids are never negative, as in JSONL). DATA_LOSS when the
// value's bytes disagree with its header (bad dtype byte, dims past the value, element
// bytes not dims x dtype size). Messages say what is wrong; the caller prefixes where.
absl::Status DecodeNdarrayTokens(const MdsEncoding& encoding, absl::string_view value,
                                 std::vector<int32_t>* out);

}  // namespace zephon::pipeline::mds

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_ENCODING_H_
