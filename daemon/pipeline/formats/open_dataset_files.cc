#include "daemon/pipeline/formats/open_dataset_files.h"

#include "daemon/pipeline/formats/remote_files.h"

namespace zephon::pipeline {

absl::StatusOr<std::unique_ptr<DatasetFiles>> OpenDatasetFiles(
    const storage::Location& location, const OpenOptions& options) {
  switch (location.kind) {
    case storage::LocationKind::kS3: {
      absl::StatusOr<std::unique_ptr<RemoteDatasetFiles>> remote =
          RemoteDatasetFiles::Open(location.path_or_url, options);
      if (!remote.ok()) return remote.status();
      return std::unique_ptr<DatasetFiles>(*std::move(remote));
    }
    case storage::LocationKind::kLocal:
      break;
  }
  return LocalDatasetFiles();
}

}  // namespace zephon::pipeline
