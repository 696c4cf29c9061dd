// The records of one MDS shard as a RecordSource (record_source.h): each sample reduced
// to the one column the dataset reads.
//
// OpenMdsRecords reads the shard's stored file whole (zip_data's when compressed, else
// raw_data's; shards are at most 4 GiB and Streaming's default size_limit is 64 MiB),
// checks its size and the hashes the index lists for it (mds_hash.h), decompresses it
// (mds_decompress.h), checks the raw bytes' size and hashes, and parses the sample table
// (mds_sample_table.h). Each Next() then decodes one sample's column:
//   kText   from str (valid UTF-8; DATA_LOSS otherwise) or bytes (INVALID_ARGUMENT when
//           not UTF-8, naming the sample).
//   kTokens from ndarray columns of an integer dtype (mds_encoding.h); a value outside
//           [0, 2^31) is INVALID_ARGUMENT naming shard, sample, element and value.
// Open fails before any record is read for a missing column (INVALID_ARGUMENT listing
// the columns there are) or a column of the wrong kind (INVALID_ARGUMENT naming the
// column, its encoding and what would work), and for a stored file whose size differs
// from the index (DATA_LOSS). Never yields kNull: MDS has no null values.
// Where() is "<shard file>: sample <i>". Thread-compatible.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_RECORDS_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_RECORDS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/mds/mds_index.h"
#include "daemon/pipeline/formats/record_source.h"
#include "daemon/pipeline/formats/shard_file.h"

namespace zephon::pipeline::mds {

// `shard_file` is the shard's stored file (shard.stored().basename, resolved against the
// index's directory by the caller).
absl::StatusOr<std::unique_ptr<RecordSource>> OpenMdsRecords(
    const MdsShardInfo& shard, std::unique_ptr<ShardFile> shard_file, const RecordField& field);

}  // namespace zephon::pipeline::mds

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_RECORDS_H_
