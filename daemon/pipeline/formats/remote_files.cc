#include "daemon/pipeline/formats/remote_files.h"

#include <fnmatch.h>

#include <algorithm>
#include <memory>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/pipeline/formats/path_glob.h"
#include "daemon/storage/s3_store.h"

namespace zephon::pipeline {
namespace {

constexpr char kS3Scheme[] = "s3://";

// One object of a store, read through the shard cache.
class RemoteShardFile final : public ShardFile {
 public:
  RemoteShardFile(std::shared_ptr<storage::ObjectStore> store,
                  std::shared_ptr<storage::ShardCache> cache, storage::RemoteObject object)
      : store_(std::move(store)), cache_(std::move(cache)), object_(std::move(object)) {}

  const std::string& path() const override { return object_.url; }
  uint64_t size() const override { return object_.info.size; }
  absl::Status ReadAt(uint64_t offset, uint64_t n, char* out) const override {
    return cache_->Read(*store_, object_, offset, n, out);
  }

 private:
  const std::shared_ptr<storage::ObjectStore> store_;
  const std::shared_ptr<storage::ShardCache> cache_;
  const storage::RemoteObject object_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteDatasetFiles>> RemoteDatasetFiles::Open(
    const std::string& url, const OpenOptions& options) {
  ASSIGN_OR_RETURN(storage::S3Location location, storage::ParseS3Url(url));
  const std::string bucket_url = absl::StrCat(kS3Scheme, location.bucket);
  std::shared_ptr<storage::ObjectStore> store;
  std::string store_id = bucket_url;
  if (options.open_store) {
    ASSIGN_OR_RETURN(store, options.open_store(bucket_url));
  } else {
    ASSIGN_OR_RETURN(std::unique_ptr<storage::S3Store> s3_store,
                     storage::S3Store::OpenUrl(bucket_url, options.s3));
    store_id = absl::StrCat(bucket_url, "@", s3_store->options().endpoint);
    store = std::move(s3_store);
  }
  std::shared_ptr<storage::ShardCache> cache = options.shard_cache;
  if (cache == nullptr) {
    storage::ShardCacheOptions memory_only;
    memory_only.max_bytes = 0;
    ASSIGN_OR_RETURN(cache, storage::ShardCache::Create(memory_only));
  }
  return std::unique_ptr<RemoteDatasetFiles>(new RemoteDatasetFiles(
      bucket_url, std::move(store_id), std::move(store), std::move(cache)));
}

absl::StatusOr<std::string> RemoteDatasetFiles::KeyOf(const std::string& path) const {
  if (path == bucket_url_) return std::string();
  if (!absl::StartsWith(path, bucket_url_ + "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", path, "' is not in ", bucket_url_, " (one dataset, one bucket)"));
  }
  return path.substr(bucket_url_.size() + 1);
}

absl::StatusOr<DatasetFiles::Resolved> RemoteDatasetFiles::Resolve(const std::string& path) {
  ASSIGN_OR_RETURN(std::string key, KeyOf(path));
  Resolved out;
  if (IsGlobPattern(key)) {
    out.kind = Kind::kGlob;
    const std::string literal = key.substr(0, key.find_first_of("*?[\\"));
    // Under FNM_PATHNAME only a '/' in the pattern matches a '/' in a key, so with none
    // past the literal part every match lies directly in the literal's "directory"
    // (s3://b/data/shard-*.bin): one level is listed, not the subtree under it.
    std::vector<storage::ObjectInfo> listed;
    if (key.find('/', literal.size()) == std::string::npos) {
      ASSIGN_OR_RETURN(storage::DirectoryListing level, store_->ListDirectory(literal));
      listed = std::move(level.objects);
    } else {
      ASSIGN_OR_RETURN(listed, store_->List(literal));
    }
    for (storage::ObjectInfo& info : listed) {
      if (fnmatch(key.c_str(), info.key.c_str(), FNM_PATHNAME | FNM_PERIOD) != 0) continue;
      out.files.push_back(UrlOf(info.key));
      known_[info.key] = std::move(info);
    }
    if (out.files.empty()) {
      return absl::NotFoundError(absl::StrCat("glob '", path, "' matches no objects"));
    }
    std::sort(out.files.begin(), out.files.end());
    return out;
  }
  const bool names_a_directory = key.empty() || key.back() == '/';
  while (!key.empty() && key.back() == '/') key.pop_back();
  const std::string dir = key.empty() ? "" : key + "/";
  // One level: a "directory" is a key with any object under it, directly (objects) or
  // deeper (common_prefixes), exactly when a recursive List(dir) would be non-empty.
  absl::StatusOr<storage::DirectoryListing> level = store_->ListDirectory(dir);
  if (absl::IsPermissionDenied(level.status()) && !names_a_directory) {
    // A read-only policy may grant s3:GetObject without s3:ListBucket: then the path
    // can only be an object (or a Megatron prefix), which HEAD/GET decide.
    out.files.push_back(UrlOf(key));
    return out;
  }
  ASSIGN_OR_RETURN(storage::DirectoryListing listed, std::move(level));
  if (key.empty() || !listed.objects.empty() || !listed.common_prefixes.empty()) {
    out.kind = Kind::kDirectory;
    for (storage::ObjectInfo& info : listed.objects) {
      const std::string name = info.key.substr(dir.size());
      if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos) continue;
      out.files.push_back(UrlOf(info.key));
      known_[info.key] = std::move(info);
    }
    std::sort(out.files.begin(), out.files.end());
    return out;
  }
  out.files.push_back(UrlOf(key));
  return out;
}

absl::StatusOr<storage::ObjectInfo> RemoteDatasetFiles::Info(const std::string& key) {
  if (auto it = known_.find(key); it != known_.end()) return it->second;
  ASSIGN_OR_RETURN(storage::ObjectInfo info, store_->Head(key));
  known_[key] = info;
  return info;
}

absl::StatusOr<bool> RemoteDatasetFiles::Exists(const std::string& path) {
  ASSIGN_OR_RETURN(std::string key, KeyOf(path));
  if (key.empty()) return false;
  absl::StatusOr<storage::ObjectInfo> info = Info(key);
  if (info.ok()) return true;
  if (absl::IsNotFound(info.status())) return false;
  return info.status();
}

absl::StatusOr<std::unique_ptr<ShardFile>> RemoteDatasetFiles::Open(const std::string& path) {
  ASSIGN_OR_RETURN(std::string key, KeyOf(path));
  if (key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("'", path, "' names a bucket, not an object"));
  }
  ASSIGN_OR_RETURN(storage::ObjectInfo info, Info(key));
  storage::RemoteObject object;
  object.store_id = store_id_;
  object.url = UrlOf(key);
  object.info = std::move(info);
  object.cache_id = storage::ShardCache::ObjectId(object);
  return std::unique_ptr<ShardFile>(new RemoteShardFile(store_, cache_, std::move(object)));
}

absl::StatusOr<DatasetFiles::JsonlOpener> RemoteDatasetFiles::PrepareJsonl(
    const std::string& path, const JsonlShardOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<ShardFile> opened, Open(path));
  ASSIGN_OR_RETURN(std::string key, KeyOf(path));
  ASSIGN_OR_RETURN(std::string version, VersionOf(key));
  // The file reads through the daemon's shard cache and store (both thread-safe).
  auto file = std::make_shared<std::unique_ptr<ShardFile>>(std::move(opened));
  return JsonlOpener([file, version, &options] {
    return JsonlShard::Open(std::move(*file), version, options);
  });
}

absl::StatusOr<std::string> RemoteDatasetFiles::VersionOf(const std::string& key) {
  ASSIGN_OR_RETURN(storage::ObjectInfo info, Info(key));
  return info.version.empty() ? absl::StrCat("mtime:", absl::ToUnixNanos(info.mtime))
                              : info.version;
}

absl::StatusOr<DatasetFiles::Identity> RemoteDatasetFiles::SourceIdentity(
    const std::string& path) {
  ASSIGN_OR_RETURN(std::string key, KeyOf(path));
  ASSIGN_OR_RETURN(storage::ObjectInfo info, Info(key));
  ASSIGN_OR_RETURN(std::string version, VersionOf(key));
  Identity id;
  id.size = info.size;
  id.bytes = RemoteSourceIdentity(UrlOf(key), info.size, version);
  return id;
}

}  // namespace zephon::pipeline
