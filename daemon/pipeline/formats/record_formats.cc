#include "daemon/pipeline/formats/record_formats.h"

#include <any>
#include <cstdlib>
#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/mix.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/mds/mds_index.h"
#include "daemon/pipeline/formats/mds/mds_records.h"
#include "daemon/pipeline/formats/parquet/parquet_records.h"

namespace zephon::pipeline {
namespace {

std::string BaseName(const std::string& path) {
  return std::filesystem::path(path).filename().string();
}

}  // namespace

absl::StatusOr<std::vector<RecordShardRef>> DefaultRecordShards(
    const RecordFormat& format, const std::string& path, const DatasetFiles::Resolved& resolved) {
  std::vector<RecordShardRef> shards;
  for (const std::string& f : resolved.files) {
    if (resolved.kind == DatasetFiles::Kind::kDirectory && !format.is_shard_name(BaseName(f))) {
      continue;
    }
    shards.push_back({f, {}});
  }
  if (shards.empty() && resolved.kind == DatasetFiles::Kind::kDirectory) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " holds no ", format.name, " shard; point the dataset at the directory of its ",
        format.name, " files, or at a glob matching them"));
  }
  return shards;
}

RecordFormat ParquetRecordFormat() {
  RecordFormat f;
  f.name = "parquet";
  f.is_shard_name = [](std::string_view name) {
    constexpr std::string_view kSuffix = ".parquet";
    return name.size() > kSuffix.size() && name.substr(name.size() - kSuffix.size()) == kSuffix;
  };
  f.open = [](std::unique_ptr<ShardFile> file, const RecordShardRef&, const RecordField& field) {
    return OpenParquetRecords(std::move(file), field);
  };
  f.checksum = [](const ShardFile& file, const RecordShardRef&) -> absl::StatusOr<std::string> {
    ASSIGN_OR_RETURN(const uint64_t footer, ParquetFooterChecksum(file));
    return absl::StrFormat("%016x", footer);
  };
  return f;
}

// The file MosaicML Streaming writes beside its shards; it names them.
constexpr std::string_view kMdsIndexName = "index.json";

RecordFormat MdsRecordFormat() {
  RecordFormat f;
  f.name = "mds";
  f.is_shard_name = [](std::string_view name) { return name == kMdsIndexName; };
  // One ref per index entry, its MdsShardInfo as the detail: a directory holding
  // index.json (local or s3://), or the index.json itself.
  f.resolve = [](const std::string& path, const DatasetFiles::Resolved& resolved,
                 DatasetFiles& files) -> absl::StatusOr<std::vector<RecordShardRef>> {
    std::string index_path;
    for (const std::string& file : resolved.files) {
      if (BaseName(file) == kMdsIndexName) index_path = file;
    }
    if (index_path.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, " holds no index.json; point an mds dataset at the directory MosaicML "
                "Streaming wrote (its index.json and shard files)"));
    }
    ASSIGN_OR_RETURN(std::unique_ptr<ShardFile> index_file, files.Open(index_path));
    ASSIGN_OR_RETURN(mds::MdsIndex index, mds::OpenMdsIndex(*index_file));
    std::vector<RecordShardRef> shards;
    for (const mds::MdsShardInfo& shard : index.shards) {
      shards.push_back({mds::MdsShardPath(index_path, shard), shard});
    }
    if (shards.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(index_path, " lists no shards"));
    }
    return shards;
  };
  f.open = [](std::unique_ptr<ShardFile> file, const RecordShardRef& ref,
              const RecordField& field) {
    return mds::OpenMdsRecords(std::any_cast<const mds::MdsShardInfo&>(ref.detail),
                               std::move(file), field);
  };
  // The index entry's description of the shard: what changes when the shard does (its
  // stored size and hashes, sample count, columns, compression); cheap, no data read.
  f.checksum = [](const ShardFile&, const RecordShardRef& ref) -> absl::StatusOr<std::string> {
    const auto& shard = std::any_cast<const mds::MdsShardInfo&>(ref.detail);
    std::string bytes = absl::StrCat(shard.stored().basename, "\0", shard.stored().bytes, "\0",
                                     shard.raw_data.bytes, "\0", shard.samples, "\0",
                                     shard.compression_text, "\0");
    for (const mds::MdsFileInfo* info : {&shard.raw_data, &shard.stored()}) {
      for (const auto& [algorithm, digest] : info->hashes) {
        absl::StrAppend(&bytes, algorithm, "=", digest, "\0");
      }
    }
    for (const mds::MdsColumn& column : shard.columns) {
      absl::StrAppend(&bytes, column.name, ":", column.encoding.text, "\0");
    }
    return absl::StrFormat("%016x", HashBytes(bytes));
  };
  return f;
}

RecordFormats& RecordFormats::Global() {
  // The built-in record formats; tests register their own.
  static RecordFormats* const formats = [] {
    auto* f = new RecordFormats();
    for (RecordFormat format : {ParquetRecordFormat(), MdsRecordFormat()}) {
      const absl::Status s = f->Register(std::move(format));
      if (!s.ok()) std::abort();  // a programming error in the two entries above
    }
    return f;
  }();
  return *formats;
}

absl::Status RecordFormats::Register(RecordFormat format) {
  if (format.name.empty() || !format.is_shard_name || !format.open || !format.checksum) {
    return absl::InvalidArgumentError(
        absl::StrCat("record format '", format.name,
                     "' needs a name, is_shard_name, open and checksum"));
  }
  if (format.name == "megatron" || format.name == "flat" || format.name == "jsonl") {
    return absl::InvalidArgumentError(
        absl::StrCat("record format '", format.name, "' is a built-in format's name"));
  }
  absl::MutexLock lock(&mu_);
  const std::string name = format.name;
  if (!formats_.emplace(name, std::make_shared<const RecordFormat>(std::move(format))).second) {
    return absl::AlreadyExistsError(absl::StrCat("record format '", name, "' registered twice"));
  }
  return absl::OkStatus();
}

std::shared_ptr<const RecordFormat> RecordFormats::Find(std::string_view name) const {
  absl::MutexLock lock(&mu_);
  auto it = formats_.find(name);
  return it == formats_.end() ? nullptr : it->second;
}

std::shared_ptr<const RecordFormat> RecordFormats::Detect(
    const std::vector<std::string>& file_names) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [name, format] : formats_) {
    for (const std::string& f : file_names) {
      if (format->is_shard_name(BaseName(f))) return format;
    }
  }
  return nullptr;
}

std::vector<std::string> RecordFormats::Names() const {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> names;
  for (const auto& [name, format] : formats_) names.push_back(name);
  return names;
}

}  // namespace zephon::pipeline
