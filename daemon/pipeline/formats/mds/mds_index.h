// MdsIndex: a MosaicML Streaming dataset's index.json (version 2), as Streaming's writer
// writes it (streaming/base/format/base/writer.py, mds/writer.py):
//   {"version": 2, "shards": [{"format": "mds", "version": 2, "samples": N,
//     "column_names": [...], "column_encodings": [...], "column_sizes": [int|null...],
//     "compression": null | "zstd" | "zstd:7" | "gz[:L]" | "bz2[:L]" | "br[:L]" | "snappy",
//     "hashes": ["sha1", "xxh64", ...], "size_limit": int|null,
//     "raw_data": {"basename", "bytes", "hashes": {algo: hex}},
//     "zip_data": null | {"basename", "bytes", "hashes"}}, ...]}
// Basenames are relative to the index's directory (merged indexes use subfolders);
// absolute paths and ".." are refused.
//
// Errors: INVALID_ARGUMENT naming the index file and the JSON path (shards[3].raw_data.
// bytes) for malformed JSON, a missing or mistyped member or an inconsistent shard;
// UNIMPLEMENTED naming the shard for a format other than "mds", an index version other
// than 2, or a compression or column encoding Streaming does not have.
// Thread-safety: value types and pure functions.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_INDEX_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_INDEX_H_

#include <cstdint>
#include <optional>
#include <string>
#include "absl/strings/string_view.h"
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/mds/mds_encoding.h"
#include "daemon/pipeline/formats/shard_file.h"

namespace zephon::pipeline::mds {

// The most bytes a shard may hold (raw or compressed): its sample offsets are uint32.
inline constexpr uint64_t kMaxMdsShardBytes = uint64_t{1} << 32;

// Shard compressions (Streaming's compression.py families; levels only matter to writers).
enum class MdsCompression { kNone, kZstd, kGzip, kBzip2, kBrotli, kSnappy };
absl::string_view MdsCompressionName(MdsCompression c);

struct MdsFileInfo {
  std::string basename;
  uint64_t bytes = 0;
  // (algorithm, lowercase hex digest) in the index's order.
  std::vector<std::pair<std::string, std::string>> hashes;
};

struct MdsColumn {
  std::string name;
  MdsEncoding encoding;
  // column_sizes[i]: the fixed encoded size, or nullopt when each sample carries it.
  std::optional<uint64_t> size;
};

struct MdsShardInfo {
  std::string index_path;  // for messages
  size_t shard = 0;        // position in shards[]
  std::vector<MdsColumn> columns;
  MdsCompression compression = MdsCompression::kNone;
  std::string compression_text;  // as written ("zstd:7"); empty when none
  std::vector<std::string> hashes;
  MdsFileInfo raw_data;
  std::optional<MdsFileInfo> zip_data;  // set iff compression != kNone
  uint64_t samples = 0;
  std::optional<uint64_t> size_limit;

  // The file that holds the shard: zip_data's basename when compressed, else raw_data's.
  const MdsFileInfo& stored() const { return zip_data ? *zip_data : raw_data; }
  // The column named `name`, or nullptr.
  const MdsColumn* Column(absl::string_view name) const;
};

struct MdsIndex {
  std::string path;
  std::vector<MdsShardInfo> shards;
  uint64_t samples = 0;  // over all shards
  // Lowercase hex SHA-256 of the index.json bytes, for the dataset fingerprint.
  std::string checksum;
};

// The path or URL of the shard's stored file: `index_path`'s directory joined with
// shard.stored().basename ("s3://b/ds/index.json" -> "s3://b/ds/shard.00000.mds.zstd").
std::string MdsShardPath(absl::string_view index_path, const MdsShardInfo& shard);

// Parses index.json bytes; `path` names the file in messages.
absl::StatusOr<MdsIndex> ParseMdsIndex(std::string path, absl::string_view json);
// Reads the whole file (at most kMaxMdsIndexBytes) and parses it.
inline constexpr uint64_t kMaxMdsIndexBytes = uint64_t{1} << 30;
absl::StatusOr<MdsIndex> OpenMdsIndex(const ShardFile& index_json);

}  // namespace zephon::pipeline::mds

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_INDEX_H_
