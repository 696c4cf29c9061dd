// Decoders for the Parquet value and level encodings this reader supports: PLAIN
// (BYTE_ARRAY, INT32, INT64), the RLE/bit-packed hybrid (levels and dictionary
// indices), DELTA_BINARY_PACKED, DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY
// (parquet-format's Encodings.md).
//
// Inputs are untrusted page bytes: every run, length and bit width is checked against
// the bytes left and the value count the page header states, so no decoder reads past
// its input or allocates more than the caller's value count (or, for DELTA_BYTE_ARRAY,
// kMaxDecodedPageBytes). Errors are DATA_LOSS describing the problem; the caller
// prefixes file, row group, column and page. Thread-safe (no shared state).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_ENCODINGS_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_ENCODINGS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "daemon/pipeline/formats/parquet/byte_buffer.h"

namespace zephon::pipeline::parquet {

// The most bytes one decoded page may hold (a page header's uncompressed size, the
// strings DELTA_BYTE_ARRAY rebuilds): larger is refused as corrupt.
inline constexpr size_t kMaxDecodedPageBytes = size_t{1} << 30;

// Decodes exactly `n` values of `bit_width` bits (0..32, at most T's width) from
// RLE/bit-packed hybrid `data` (no length prefix) into out[0, n). T: uint8_t (levels)
// or uint32_t (dictionary indices).
template <typename T>
absl::Status DecodeRleHybrid(std::string_view data, int bit_width, size_t n, T* out);

// PLAIN BYTE_ARRAY: `n` values (4-byte little-endian length, bytes), views into data.
absl::Status DecodePlainByteArray(std::string_view data, size_t n,
                                  std::vector<std::string_view>* out);
// PLAIN INT32 (`width` 4) or INT64 (`width` 8): `n` values, sign-extended.
absl::Status DecodePlainInts(std::string_view data, int width, size_t n,
                             PodVector<int64_t>* out);

// DELTA_BINARY_PACKED: the values of one encoded run (its header states how many; more
// than max_values is corrupt). *consumed receives the bytes the run took (the
// DELTA_LENGTH_BYTE_ARRAY data follows it). `width` 4 wraps arithmetic to 32 bits.
absl::Status DecodeDeltaBinaryPacked(std::string_view data, int width, size_t max_values,
                                     PodVector<int64_t>* out, size_t* consumed);
// DELTA_LENGTH_BYTE_ARRAY: exactly `n` values, views into data.
absl::Status DecodeDeltaLengthByteArray(std::string_view data, size_t n,
                                        std::vector<std::string_view>* out);
// DELTA_BYTE_ARRAY: exactly `n` values rebuilt into *arena (views into it; the arena
// is not resized afterwards, so they stay valid until it changes).
absl::Status DecodeDeltaByteArray(std::string_view data, size_t n, std::string* arena,
                                  std::vector<std::string_view>* out);

}  // namespace zephon::pipeline::parquet

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_ENCODINGS_H_
