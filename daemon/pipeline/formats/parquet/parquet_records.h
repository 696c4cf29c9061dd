// OpenParquetRecords: one Parquet file's rows as a RecordSource (record_source.h),
// each reduced to the one field the dataset reads; ParquetFooterChecksum: the footer's
// hash for the dataset fingerprint.
//
// Reads the footer, then only the selected column's chunks (their byte ranges from the
// footer, through ShardFile::View/ReadAt, so an s3:// file is read with ranged GETs),
// row groups in order, one chunk's pages at a time, decoded page by page.
// NumRecords() is the footer's num_rows; Where() is
// "<file>: row <r> (row group <g>, page <p>)". Errors follow record_source.h: DATA_LOSS
// for a corrupt file (naming file, row group, column and page), INVALID_ARGUMENT for a
// missing or wrong-kind field and for token ids outside int32, UNIMPLEMENTED naming
// a valid but unsupported feature (the LZO codec, FIXED_LEN_BYTE_ARRAY, nested lists).
// The source is thread-compatible; ParquetFooterChecksum is thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_PARQUET_RECORDS_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_PARQUET_RECORDS_H_

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/record_source.h"
#include "daemon/pipeline/formats/shard_file.h"

namespace zephon::pipeline {

absl::StatusOr<std::unique_ptr<RecordSource>> OpenParquetRecords(
    std::unique_ptr<ShardFile> file, const RecordField& field);

// A 64-bit hash of the file's footer (its Thrift bytes and their length): changes when
// the file is rewritten. Reads only the footer. DATA_LOSS for a file that is not
// Parquet (bad magic, footer length past the file).
absl::StatusOr<uint64_t> ParquetFooterChecksum(const ShardFile& file);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_PARQUET_RECORDS_H_
