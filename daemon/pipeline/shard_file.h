// ShardFile: read-only bytes of one shard file, the storage seam of the readers.
//
// Readers only see `bytes()`, so an object-store backend can later provide a
// ShardFile that fetches/caches ranges without touching the format code. v1 has one
// implementation, MapShardFile(): a local file mapped read-only with mmap.
// Thread-safe: the bytes are immutable for the object's lifetime.
#ifndef ZEPHON_DAEMON_PIPELINE_SHARD_FILE_H_
#define ZEPHON_DAEMON_PIPELINE_SHARD_FILE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace zephon::pipeline {

class ShardFile {
 public:
  virtual ~ShardFile() = default;
  // The path (or URL) the file was opened from; used in error messages.
  virtual const std::string& path() const = 0;
  // The whole content; valid until the ShardFile is destroyed.
  virtual std::string_view bytes() const = 0;
};

// Maps `path` read-only. NOT_FOUND if it does not exist, FAILED_PRECONDITION if it is
// not a regular file, INTERNAL if mmap fails. An empty file maps to empty bytes.
absl::StatusOr<std::unique_ptr<ShardFile>> MapShardFile(const std::string& path);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_SHARD_FILE_H_
