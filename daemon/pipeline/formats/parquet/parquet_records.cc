#include "daemon/pipeline/formats/parquet/parquet_records.h"

#include <cstring>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/mix.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/parquet/column_chunk_reader.h"
#include "daemon/pipeline/formats/parquet/metadata.h"
#include "daemon/pipeline/formats/parquet/schema.h"

namespace zephon::pipeline {
namespace {

using parquet::ColumnChunkReader;
using parquet::ColumnPlan;
using parquet::DecodedPage;
using parquet::FileMetaData;

constexpr std::string_view kMagic = "PAR1";

absl::Status Prefix(const ShardFile& file, const absl::Status& s) {
  return absl::Status(s.code(), absl::StrCat(file.path(), ": ", s.message()));
}

// The footer's Thrift bytes (into *scratch or the resident file).
absl::StatusOr<std::string_view> ReadFooter(const ShardFile& file, std::string* scratch) {
  const uint64_t size = file.size();
  if (size < 12) {
    return absl::DataLossError(absl::StrCat(file.path(), ": ", size,
                                            " bytes is too short for a Parquet file"));
  }
  char head[4], tail[8];
  RETURN_IF_ERROR(file.ReadAt(0, 4, head));
  RETURN_IF_ERROR(file.ReadAt(size - 8, 8, tail));
  if (std::string_view(tail + 4, 4) == "PARE") {
    return absl::UnimplementedError(absl::StrCat(
        file.path(), ": the Parquet file is encrypted (PARE footer), which is not supported"));
  }
  if (std::string_view(head, 4) != kMagic || std::string_view(tail + 4, 4) != kMagic) {
    return absl::DataLossError(absl::StrCat(
        file.path(), ": not a Parquet file (no PAR1 magic at its start and end); check the "
        "path and fmt="));
  }
  uint32_t len;
  std::memcpy(&len, tail, 4);
  if (len == 0 || len > size - 12) {
    return absl::DataLossError(absl::StrCat(file.path(), ": footer length ", len,
                                            " passes the file's ", size,
                                            " bytes (truncated or corrupt file)"));
  }
  return file.View(size - 8 - len, len, scratch);
}

class ParquetRecordSource final : public RecordSource {
 public:
  ParquetRecordSource(std::unique_ptr<ShardFile> file, FileMetaData meta, ColumnPlan plan)
      : file_(std::move(file)), meta_(std::move(meta)), plan_(std::move(plan)) {}

  absl::StatusOr<bool> Next(Value* value) override {
    if (row_ == static_cast<uint64_t>(meta_.num_rows)) {
      if (chunk_ != nullptr) {  // the last chunk must end with its last row
        ASSIGN_OR_RETURN(bool more, EnsureLevel());
        if (more) return LevelsDisagree("the pages hold more");
        chunk_.reset();
      }
      return false;
    }
    RETURN_IF_ERROR(PositionAtRow());
    ++row_;
    ++rows_in_group_;
    return plan_.kind == RecordField::Kind::kText ? TextRecord(value) : TokensRecord(value);
  }

  std::optional<uint64_t> NumRecords() const override { return meta_.num_rows; }

  std::string Where() const override {
    return absl::StrCat(file_->path(), ": row ", row_ == 0 ? 0 : row_ - 1, " (row group ",
                        row_group_, ", page ", chunk_ ? chunk_->page_index() : 0, ")");
  }

 private:
  // Whether the current chunk has a level at level_, loading its next pages as needed.
  absl::StatusOr<bool> EnsureLevel() {
    while (level_ >= page_.num_levels) {
      ASSIGN_OR_RETURN(bool more, chunk_->NextPage(&page_));
      if (!more) return false;
      level_ = 0;
      value_ = 0;
    }
    return true;
  }

  absl::Status LevelsDisagree(const std::string& what) const {
    return absl::DataLossError(absl::StrCat(chunk_->Context(), ": the column's levels disagree "
                                            "with the row group's ",
                                            meta_.row_groups[row_group_].num_rows, " rows (",
                                            what, ")"));
  }

  // Makes the next level the start of row row_, in the right row group.
  absl::Status PositionAtRow() {
    while (true) {
      if (chunk_ == nullptr) {
        if (row_group_ >= static_cast<int>(meta_.row_groups.size())) {
          return absl::DataLossError(absl::StrCat(
              file_->path(), ": the row groups hold fewer rows than the footer's num_rows ",
              meta_.num_rows));
        }
        const parquet::RowGroup& group = meta_.row_groups[row_group_];
        if (static_cast<size_t>(plan_.leaf_index) >= group.columns.size()) {
          return absl::DataLossError(absl::StrCat(file_->path(), ": row group ", row_group_,
                                                  " has ", group.columns.size(),
                                                  " column chunks, fewer than the schema"));
        }
        ASSIGN_OR_RETURN(chunk_, ColumnChunkReader::Open(*file_, group.columns[plan_.leaf_index],
                                                         row_group_, plan_, &buffers_));
        page_.num_levels = 0;
        level_ = 0;
        rows_in_group_ = 0;
      }
      const int64_t group_rows = meta_.row_groups[row_group_].num_rows;
      ASSIGN_OR_RETURN(bool has, EnsureLevel());
      if (rows_in_group_ < group_rows) {
        if (!has) return LevelsDisagree(absl::StrCat("the pages end after ", rows_in_group_));
        return absl::OkStatus();
      }
      if (has) return LevelsDisagree("the pages hold more");
      chunk_.reset();
      ++row_group_;
    }
  }

  absl::StatusOr<bool> TextRecord(Value* value) {
    const uint32_t def = plan_.max_def > 0 ? page_.def[level_] : 0;
    ++level_;
    if (def != static_cast<uint32_t>(plan_.max_def)) {
      value->kind = Value::Kind::kNull;
      return true;
    }
    value->kind = Value::Kind::kText;
    value->text = page_.strings[value_++];
    return true;
  }

  absl::StatusOr<bool> TokensRecord(Value* value) {
    tokens_.clear();
    if (page_.rep[level_] != 0) return LevelsDisagree("a row starts inside a list");
    const uint8_t max_def = plan_.max_def;
    const uint8_t list_def = plan_.list_def;
    // Unsigned values are read as such (a UINT_32 of 2^31 or more is stored negative).
    const bool unsigned_ints = plan_.unsigned_ints;
    const bool int32_column = plan_.type == parquet::PhysicalType::kInt32;
    bool null = false;
    bool first = true;  // the row's first level (repetition level 0)
    while (true) {
      // The row's levels in this page, in one pass.
      const uint8_t* rep = page_.rep.data();
      const uint8_t* def = page_.def.data();
      const int64_t* ints = page_.ints.data();
      const size_t n = page_.num_levels;
      size_t i = level_;
      for (; i < n && (first || rep[i] != 0); ++i) {
        first = false;
        const uint8_t d = def[i];
        if (d == max_def) {
          const int64_t v = ints[value_++];
          // Token ids are in [0, 2^31) as in every other format (negatives included:
          // they wrap past the bound as unsigned).
          if (static_cast<uint64_t>(v) >
              static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
            if (v < 0 && !unsigned_ints) {
              return absl::InvalidArgumentError(absl::StrCat(
                  Where(), ": token id ", v, " is negative (list element ", tokens_.size(),
                  "); token ids are in [0, 2^31)"));
            }
            return absl::InvalidArgumentError(absl::StrCat(
                Where(), ": token id ",
                !unsigned_ints ? absl::StrCat(v)
                : int32_column ? absl::StrCat(static_cast<uint32_t>(v))
                               : absl::StrCat(static_cast<uint64_t>(v)),
                " does not fit int32 (list element ", tokens_.size(), ")"));
          }
          tokens_.push_back(static_cast<int32_t>(v));
        } else if (d >= list_def) {
          return absl::InvalidArgumentError(absl::StrCat(
              Where(), ": null token id (list element ", tokens_.size(), ")"));
        } else if (d + 1 < list_def) {
          null = true;  // a null list, or a null struct above it
        }
      }
      level_ = i;
      if (i < n) break;  // the next row starts in this page
      ASSIGN_OR_RETURN(bool has, EnsureLevel());  // the row may continue in the next page
      if (!has || page_.rep[level_] == 0) break;
    }
    if (null) {
      value->kind = Value::Kind::kNull;
      return true;
    }
    value->kind = Value::Kind::kTokens;
    value->tokens = tokens_;
    return true;
  }

  std::unique_ptr<ShardFile> file_;
  const FileMetaData meta_;
  const ColumnPlan plan_;
  int row_group_ = 0;
  parquet::ChunkBuffers buffers_;  // reused by each row group's chunk reader
  std::unique_ptr<ColumnChunkReader> chunk_;
  DecodedPage page_;
  size_t level_ = 0;
  size_t value_ = 0;
  uint64_t row_ = 0;
  int64_t rows_in_group_ = 0;
  std::vector<int32_t> tokens_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RecordSource>> OpenParquetRecords(
    std::unique_ptr<ShardFile> file, const RecordField& field) {
  std::string scratch;
  ASSIGN_OR_RETURN(std::string_view footer, ReadFooter(*file, &scratch));
  absl::StatusOr<FileMetaData> meta = parquet::ParseFileMetaData(footer);
  if (!meta.ok()) {
    return absl::DataLossError(absl::StrCat(file->path(), ": corrupt Parquet footer: ",
                                            meta.status().message()));
  }
  int64_t rows = 0;
  for (const parquet::RowGroup& g : meta->row_groups) {
    if (g.num_rows > std::numeric_limits<int64_t>::max() - rows) {
      return absl::DataLossError(absl::StrCat(file->path(), ": row group sizes overflow"));
    }
    rows += g.num_rows;
  }
  if (rows != meta->num_rows) {
    return absl::DataLossError(absl::StrCat(file->path(), ": the row groups hold ", rows,
                                            " rows, the footer's num_rows says ",
                                            meta->num_rows));
  }
  absl::StatusOr<ColumnPlan> plan = parquet::ResolveColumn(*meta, field);
  if (!plan.ok()) return Prefix(*file, plan.status());
  return std::unique_ptr<RecordSource>(
      new ParquetRecordSource(std::move(file), *std::move(meta), *std::move(plan)));
}

absl::StatusOr<uint64_t> ParquetFooterChecksum(const ShardFile& file) {
  std::string scratch;
  ASSIGN_OR_RETURN(std::string_view footer, ReadFooter(file, &scratch));
  return Combine(HashBytes(footer), footer.size());
}

}  // namespace zephon::pipeline
