// Decompression of a compressed MDS shard (zip_data) into its raw bytes, as Streaming's
// compression.py writes each family: zstd frames (python-zstd: ZSTD_compress), gzip
// members (gzip.compress), bzip2 streams (bz2.compress), brotli streams
// (brotli.compress) and raw snappy blocks (python-snappy's snappy.compress, not the
// framed format). Like Python's decompressors, zstd frames, gzip members and bzip2
// streams that follow the first are decoded too.
//
// The output must be exactly `raw_bytes` (the index's raw_data.bytes) long: more, less,
// or corrupt input is DATA_LOSS naming `name` (the shard file) and what went wrong.
// Memory grows with the output actually produced, never beyond raw_bytes, so a lying
// index cannot make it allocate more than the data decompresses to.
// Thread-safety: pure function.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_DECOMPRESS_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_DECOMPRESS_H_

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/mds/mds_index.h"

namespace zephon::pipeline::mds {

absl::StatusOr<std::string> DecompressMdsShard(MdsCompression compression,
                                               absl::string_view name,
                                               absl::string_view compressed,
                                               uint64_t raw_bytes);

}  // namespace zephon::pipeline::mds

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_DECOMPRESS_H_
