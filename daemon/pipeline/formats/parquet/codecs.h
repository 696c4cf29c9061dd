// Page decompression for the Parquet codecs this reader supports: UNCOMPRESSED,
// SNAPPY, GZIP, ZSTD, LZ4_RAW, BROTLI and the deprecated LZ4 (Hadoop-framed blocks, or
// one raw block as early parquet-cpp wrote it). LZO is UNIMPLEMENTED naming the codec.
// Thread-safe (no shared state but per-thread decompression contexts).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_CODECS_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_CODECS_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "daemon/pipeline/formats/parquet/metadata.h"

namespace zephon::pipeline::parquet {

// Decompresses `in` into out[0, expected_size). DATA_LOSS when the
// data is corrupt or decompresses to any other size than expected_size (the page
// header's uncompressed size; the caller caps it); UNIMPLEMENTED for LZO.
// Messages say what went wrong; the caller prefixes file, row group, column and page.
absl::Status Decompress(Codec codec, std::string_view in, size_t expected_size, char* out);

// Whether Decompress supports `codec` (checked when a column is opened).
absl::Status CheckCodecSupported(Codec codec);

// CRC-32 (the zlib/IEEE polynomial), as parquet-format specifies for page CRCs.
uint32_t PageCrc32(std::string_view bytes);

}  // namespace zephon::pipeline::parquet

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_CODECS_H_
