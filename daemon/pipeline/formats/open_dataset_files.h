// OpenDatasetFiles: the DatasetFiles (dataset_files.h) for a classified dataset location,
// so that Dataset::Open names the interface only and the object-store implementation
// (remote_files.h) stays behind this one function.
// Thread-safe (no shared state; the returned DatasetFiles is thread-compatible).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_OPEN_DATASET_FILES_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_OPEN_DATASET_FILES_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/dataset.h"
#include "daemon/pipeline/formats/dataset_files.h"
#include "daemon/storage/object_store.h"

namespace zephon::pipeline {

// kLocal: LocalDatasetFiles(). kS3: RemoteDatasetFiles::Open(location.path_or_url,
// options), with its errors (a malformed URL, missing credentials). Contacts nothing.
absl::StatusOr<std::unique_ptr<DatasetFiles>> OpenDatasetFiles(
    const storage::Location& location, const OpenOptions& options);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_OPEN_DATASET_FILES_H_
