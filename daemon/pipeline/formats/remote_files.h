// RemoteDatasetFiles: DatasetFiles (dataset_files.h) over an object store, for dataset
// paths "s3://bucket/key", resolved as a local path would be (opened through
// open_dataset_files.h):
//   glob      the key holds '*', '?' or '[': the key's literal part before the first
//             metacharacter is listed (one level with ListDirectory when the pattern has
//             no '/' after it, else recursively with List), and keys are matched with
//             fnmatch(FNM_PATHNAME | FNM_PERIOD), as glob(3) does; sorted by key; none is
//             NOT_FOUND naming the URL.
//   directory objects exist under key + "/" (or the key is empty): the objects directly
//             under it, names not starting with '.', sorted by key (one level listed).
//   single    otherwise: the object `key` itself (HEAD when opened or tested).
// Files open as RemoteShardFile: size and version come from the listing (or HEAD) and
// stay fixed; bytes are read through the node's ShardCache (storage/shard_cache.h), which
// checks them against both. Sorting by key equals sorting by local path, so the same files
// in S3 and on disk give the same shards, order and dataset fingerprint.
// Errors are the store's (storage/s3_store.h: operation, bucket, key, HTTP status).
// Thread-compatible (DatasetFiles); the ShardFiles it opens are thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_REMOTE_FILES_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_REMOTE_FILES_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/dataset.h"
#include "daemon/pipeline/formats/dataset_files.h"
#include "daemon/storage/object_store.h"
#include "daemon/storage/shard_cache.h"

namespace zephon::pipeline {

class RemoteDatasetFiles final : public DatasetFiles {
 public:
  // The files of the bucket `url` ("s3://bucket/key", a location that
  // storage::ClassifyLocation calls kS3) names. Opens its store (options.open_store,
  // else S3Store::OpenUrl with options.s3 (zephond's --s3-* flags), then the AWS_*
  // environment and shared files;
  // INVALID_ARGUMENT for a malformed URL, FAILED_PRECONDITION without credentials) and
  // uses options.shard_cache (or a private memory-only cache). Contacts nothing yet.
  static absl::StatusOr<std::unique_ptr<RemoteDatasetFiles>> Open(const std::string& url,
                                                                  const OpenOptions& options);

  absl::StatusOr<Resolved> Resolve(const std::string& path) override;
  absl::StatusOr<bool> Exists(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<ShardFile>> Open(const std::string& path) override;
  absl::StatusOr<JsonlOpener> PrepareJsonl(const std::string& path,
                                           const JsonlShardOptions& options) override;
  absl::StatusOr<Identity> SourceIdentity(const std::string& path) override;

 private:
  // The object's version for cache keys: its ETag, else its mtime.
  absl::StatusOr<std::string> VersionOf(const std::string& key);
  RemoteDatasetFiles(std::string bucket_url, std::string store_id,
                     std::shared_ptr<storage::ObjectStore> store,
                     std::shared_ptr<storage::ShardCache> cache)
      : bucket_url_(std::move(bucket_url)),
        store_id_(std::move(store_id)),
        store_(std::move(store)),
        cache_(std::move(cache)) {}

  // The key of `path` in this bucket; INVALID_ARGUMENT for another bucket or scheme.
  absl::StatusOr<std::string> KeyOf(const std::string& path) const;
  std::string UrlOf(const std::string& key) const { return bucket_url_ + "/" + key; }
  // The object's size and version: from a listing, else HEAD (remembered).
  absl::StatusOr<storage::ObjectInfo> Info(const std::string& key);

  const std::string bucket_url_;  // "s3://bucket"
  const std::string store_id_;    // "s3://bucket@endpoint": names the store in the cache
  const std::shared_ptr<storage::ObjectStore> store_;
  const std::shared_ptr<storage::ShardCache> cache_;
  std::map<std::string, storage::ObjectInfo> known_;  // key -> info, from List / Head
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_REMOTE_FILES_H_
