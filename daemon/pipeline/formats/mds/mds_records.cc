#include "daemon/pipeline/formats/mds/mds_records.h"

#include <simdjson.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/mds/mds_decompress.h"
#include "daemon/pipeline/formats/mds/mds_hash.h"
#include "daemon/pipeline/formats/mds/mds_sample_table.h"

namespace zephon::pipeline::mds {
namespace {

// Checks the selected column against what the dataset reads; the message names the
// column, its encoding and the fix.
absl::Status CheckColumnKind(const MdsShardInfo& shard, const MdsColumn& column,
                             RecordField::Kind kind) {
  const MdsEncoding& e = column.encoding;
  const std::string what = absl::StrCat("MDS index ", shard.index_path, ": shard ", shard.shard,
                                        " (", shard.stored().basename, ") column \"",
                                        column.name, "\" has encoding \"", e.text, "\"");
  if (kind == RecordField::Kind::kText) {
    if (e.kind == MdsEncoding::Kind::kStr || e.kind == MdsEncoding::Kind::kBytes) {
      return absl::OkStatus();
    }
    if (e.kind == MdsEncoding::Kind::kNdarray) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ", token ids, not text: read it without tokenize (field=\"", column.name,
          "\" on the dataset), or tokenize a str column"));
    }
    return absl::InvalidArgumentError(absl::StrCat(
        what, ", which is not text: tokenize reads str or bytes (UTF-8) columns"));
  }
  if (e.kind == MdsEncoding::Kind::kNdarray) {
    if (e.dtype && !MdsDtypeIsInteger(*e.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ", floats, not token ids: token ids are an ndarray of an integer dtype"));
    }
    return absl::OkStatus();
  }
  if (e.kind == MdsEncoding::Kind::kStr || e.kind == MdsEncoding::Kind::kBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ", text, not token ids: add tokenize(field=\"", column.name, "\") to the pipeline"));
  }
  if (e.kind == MdsEncoding::Kind::kScalar) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ", one number per sample, not a list of token ids: token ids are an ndarray "
              "column (ndarray, ndarray:uint16, ndarray:int32, ...)"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      what, ", which is not token ids: token ids are an ndarray column of an integer dtype"));
}

class MdsRecordSource : public RecordSource {
 public:
  // `raw` views `file`'s resident bytes or `owned`.
  MdsRecordSource(std::string name, std::unique_ptr<ShardFile> file, std::string owned,
                  absl::string_view raw, const MdsColumn& column, size_t column_index,
                  RecordField::Kind kind)
      : name_(std::move(name)),
        file_(std::move(file)),
        owned_(std::move(owned)),
        raw_(raw.data() == nullptr ? absl::string_view(owned_) : raw),
        encoding_(column.encoding),
        column_name_(column.name),
        column_(column_index),
        kind_(kind) {}

  absl::Status Init(const MdsShardInfo& shard) {
    std::vector<std::optional<uint64_t>> sizes;
    for (const MdsColumn& c : shard.columns) sizes.push_back(c.size);
    ASSIGN_OR_RETURN(table_, MdsSampleTable::Parse(name_, raw_, shard.samples, std::move(sizes)));
    return absl::OkStatus();
  }

  absl::StatusOr<bool> Next(Value* value) override {
    if (next_ >= table_->samples()) return false;
    current_ = next_++;
    ASSIGN_OR_RETURN(absl::string_view bytes, table_->Column(current_, column_));
    if (kind_ == RecordField::Kind::kText) {
      if (!simdjson::validate_utf8(bytes.data(), bytes.size())) {
        const bool str = encoding_.kind == MdsEncoding::Kind::kStr;
        return absl::Status(
            str ? absl::StatusCode::kDataLoss : absl::StatusCode::kInvalidArgument,
            absl::StrCat(Where(), ": column \"", column_name_, "\" (", encoding_.text,
                         ") is not valid UTF-8",
                         str ? " (Streaming writes str as UTF-8: the shard is corrupt)"
                             : "; tokenize reads UTF-8 text"));
      }
      value->kind = Value::Kind::kText;
      value->text = std::string_view(bytes.data(), bytes.size());
      return true;
    }
    if (absl::Status s = DecodeNdarrayTokens(encoding_, bytes, &tokens_); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(Where(), ": column \"", column_name_, "\" (",
                                                 encoding_.text, "): ", s.message()));
    }
    value->kind = Value::Kind::kTokens;
    value->tokens = tokens_;
    return true;
  }

  std::optional<uint64_t> NumRecords() const override { return table_->samples(); }

  std::string Where() const override { return absl::StrCat(name_, ": sample ", current_); }

 private:
  std::string name_;
  std::unique_ptr<ShardFile> file_;
  std::string owned_;
  absl::string_view raw_;
  MdsEncoding encoding_;
  std::string column_name_;
  size_t column_;
  RecordField::Kind kind_;
  std::optional<MdsSampleTable> table_;
  uint64_t next_ = 0;
  uint64_t current_ = 0;
  std::vector<int32_t> tokens_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RecordSource>> OpenMdsRecords(
    const MdsShardInfo& shard, std::unique_ptr<ShardFile> shard_file, const RecordField& field) {
  size_t index = shard.columns.size();
  for (size_t c = 0; c < shard.columns.size(); ++c) {
    if (shard.columns[c].name == field.name) index = c;
  }
  if (index == shard.columns.size()) {
    std::vector<std::string> names;
    for (const MdsColumn& c : shard.columns) names.push_back(absl::StrCat("\"", c.name, "\""));
    return absl::InvalidArgumentError(absl::StrCat(
        "MDS index ", shard.index_path, ": shard ", shard.shard, " (", shard.stored().basename,
        ") has no column \"", field.name, "\"; its columns: ", absl::StrJoin(names, ", ")));
  }
  const MdsColumn& column = shard.columns[index];
  RETURN_IF_ERROR(CheckColumnKind(shard, column, field.kind));

  const std::string name = shard_file->path();
  const MdsFileInfo& stored = shard.stored();
  if (shard_file->size() != stored.bytes) {
    return absl::DataLossError(absl::StrCat(
        "MDS shard ", name, " has ", shard_file->size(), " bytes but the index ",
        shard.index_path, " says ", stored.bytes,
        " (truncated, or rewritten after the index was written)"));
  }
  std::string scratch;
  ASSIGN_OR_RETURN(const std::string_view view, shard_file->View(0, shard_file->size(), &scratch));
  const absl::string_view bytes(view.data(), view.size());
  RETURN_IF_ERROR(VerifyMdsHashes(name, bytes, stored.hashes));
  // The raw bytes: decompressed, or the file's own (resident, or read into scratch).
  std::string owned;
  absl::string_view raw;
  if (shard.zip_data) {
    ASSIGN_OR_RETURN(owned, DecompressMdsShard(shard.compression, name, bytes,
                                               shard.raw_data.bytes));
    RETURN_IF_ERROR(VerifyMdsHashes(absl::StrCat(name, " (decompressed)"), owned,
                                    shard.raw_data.hashes));
  } else if (shard_file->data() != nullptr) {
    raw = bytes;
  } else {
    owned = std::move(scratch);
  }
  // A null `raw` means: the source views `owned` after moving it into place.
  auto source = std::make_unique<MdsRecordSource>(name, std::move(shard_file), std::move(owned),
                                                  raw, column, index, field.kind);
  RETURN_IF_ERROR(source->Init(shard));
  return source;
}

}  // namespace zephon::pipeline::mds
