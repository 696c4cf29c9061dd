// Resolves the field a dataset reads (RecordField: a top-level or dotted column name
// and text-or-tokens) against a Parquet schema: which leaf column holds it, its
// physical type, and the definition/repetition levels that mark nulls, empty lists
// and list boundaries. A field that is missing, of the other kind, or of a shape this
// reader does not read fails here, before any page is read, naming the field, what it
// is, and the fix. Thread-safe (no shared state).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_SCHEMA_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_SCHEMA_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/parquet/metadata.h"
#include "daemon/pipeline/formats/record_source.h"

namespace zephon::pipeline::parquet {

struct ColumnPlan {
  RecordField::Kind kind = RecordField::Kind::kText;
  int leaf_index = 0;               // the column chunk's index within each row group
  std::vector<std::string> path;    // the leaf's path_in_schema
  PhysicalType type = PhysicalType::kByteArray;
  // INT32/INT64 annotated unsigned (UINT_8..UINT_64): values are read as unsigned.
  bool unsigned_ints = false;
  int max_def = 0;
  int max_rep = 0;
  // kTokens: the definition level of the list's repeated node. def >= list_def: an
  // element (null when < max_def); def == list_def - 1: an empty list; below: null.
  int list_def = 0;
};

// INVALID_ARGUMENT (missing field, listing the fields that exist; wrong kind, naming
// its type and the fix), UNIMPLEMENTED (FIXED_LEN_BYTE_ARRAY, nested lists, maps),
// DATA_LOSS (a malformed schema). Messages start with the field name; the caller
// prefixes the file.
absl::StatusOr<ColumnPlan> ResolveColumn(const FileMetaData& metadata,
                                         const RecordField& field);

}  // namespace zephon::pipeline::parquet

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_SCHEMA_H_
