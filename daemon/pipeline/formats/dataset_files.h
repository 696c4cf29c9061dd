// DatasetFiles: where a dataset's files live, as Dataset::Open needs it: resolving a
// dataset path into files, testing for a file, opening one. Two implementations, the
// local filesystem (LocalDatasetFiles, here) and an object store (RemoteDatasetFiles,
// remote_files.h, for "s3://bucket/key" paths), so the format rules (detection, Megatron
// pairing, directory and glob semantics) are written once, in dataset.cc, and a dataset
// opens to the same shards, in the same order, from either place.
//
// Paths are local paths ("file://" already stripped by Dataset::Open), or URLs for the
// remote implementation.
// Thread-compatible: one Dataset::Open uses an instance at a time.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_DATASET_FILES_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_DATASET_FILES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/jsonl_reader.h"
#include "daemon/pipeline/formats/shard_file.h"

namespace zephon::pipeline {

class DatasetFiles {
 public:
  enum class Kind { kDirectory, kGlob, kSingle };
  struct Resolved {
    Kind kind = Kind::kSingle;
    std::vector<std::string> files;  // full paths, sorted (kSingle: just the path)
  };

  virtual ~DatasetFiles() = default;

  // A glob (IsGlobPattern): its matches, sorted by full path in byte order; none is
  // NOT_FOUND naming the pattern. A directory: its files (names not starting with '.';
  // no subdirectories), sorted by name. Otherwise kSingle: the path itself, which need
  // not exist.
  virtual absl::StatusOr<Resolved> Resolve(const std::string& path) = 0;
  // Whether `path` is a regular file (an existing object). Failures other than "it is
  // not there" are errors (a missing bucket, bad credentials, an unreachable store).
  virtual absl::StatusOr<bool> Exists(const std::string& path) = 0;
  // Opens `path` for reading. NOT_FOUND naming it when it does not exist.
  virtual absl::StatusOr<std::unique_ptr<ShardFile>> Open(const std::string& path) = 0;
  // Opens a JSONL shard, converting it into the token cache under options.cache_dir
  // when the cache has no conversion of this exact file with these options
  // (jsonl_reader.h); conversion fails on a line longer than options.max_line_bytes.
  // In two steps: what needs this instance (listing, metadata) runs here, and the
  // returned opener, called once, does the rest (the conversion). Openers never touch
  // this instance, so openers of several shards may run at once, on any thread, while
  // this instance serves other calls; `options` must outlive the opener.
  using JsonlOpener = std::function<absl::StatusOr<std::unique_ptr<JsonlShard>>()>;
  virtual absl::StatusOr<JsonlOpener> PrepareJsonl(const std::string& path,
                                                   const JsonlShardOptions& options) = 0;
  // What a record shard's token cache key needs of the file at `path` (record_shard.h):
  // its size, its identity bytes (token_cache_files.h: LocalSourceIdentity /
  // RemoteSourceIdentity) and, for a local file, a check that it has not changed since
  // (ABORTED naming it; null for an object: the shard cache fails a replaced one).
  // NOT_FOUND naming `path` when it does not exist.
  struct Identity {
    uint64_t size = 0;
    std::string bytes;
    std::function<absl::Status()> unchanged;
  };
  virtual absl::StatusOr<Identity> SourceIdentity(const std::string& path) = 0;
};

// The local filesystem: directories are listed (regular files only), globs expanded
// with glob(3) (path_glob.h), files read with pread (OpenLocalShardFile).
std::unique_ptr<DatasetFiles> LocalDatasetFiles();

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_DATASET_FILES_H_
