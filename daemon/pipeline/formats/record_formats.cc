#include "daemon/pipeline/formats/record_formats.h"

#include <filesystem>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

RecordFormats& RecordFormats::Global() {
  // The built-in formats' entries join here as their decoder rooms land: "parquet"
  // (is_shard_name *.parquet, the default resolver, OpenParquetRecords and
  // ParquetFooterChecksum) and "mds" (a resolver reading the directory's index.json
  // into one ref per shard with its MdsShardInfo as detail, OpenMdsRecords, a checksum
  // of the index entry). Tests register their own.
  static RecordFormats* const formats = new RecordFormats();
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
