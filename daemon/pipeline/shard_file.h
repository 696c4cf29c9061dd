// ShardFile: read-only random access to the bytes of one shard file, the storage seam
// of the readers.
//
// Two kinds: resident files, whose bytes are one contiguous range valid for the
// object's lifetime (data() != nullptr: a local file mapped read-only, or a small object
// fetched whole into memory), and remote files, whose ranges are copied out on demand
// through the node's shard cache (remote_files.h) and so can fail. Readers call View():
// a pointer into data() for resident files (no copy: the local path stays mmap + decode),
// a ReadAt into the caller's scratch buffer otherwise.
// Thread-safe: the bytes are immutable for the object's lifetime.
#ifndef ZEPHON_DAEMON_PIPELINE_SHARD_FILE_H_
#define ZEPHON_DAEMON_PIPELINE_SHARD_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zephon::pipeline {

class ShardFile {
 public:
  virtual ~ShardFile() = default;
  // The path (or URL) the file was opened from; used in error messages.
  virtual const std::string& path() const = 0;
  // Bytes in the file (fixed when it was opened).
  virtual uint64_t size() const = 0;
  // Copies bytes [offset, offset + n) into out[0, n). OUT_OF_RANGE naming the file when
  // the range passes size(); remote files fail as the shard cache does (naming the URL,
  // bucket, key and HTTP status).
  virtual absl::Status ReadAt(uint64_t offset, uint64_t n, char* out) const = 0;
  // All size() bytes, contiguous and valid for the object's lifetime; nullptr when the
  // file is not resident. Never nullptr for MapShardFile and MemoryShardFile.
  virtual const char* data() const { return nullptr; }

  // Bytes [offset, offset + n): into data() when resident, else read into *scratch.
  // Valid until *scratch changes or the file is destroyed. Errors as ReadAt.
  absl::StatusOr<std::string_view> View(uint64_t offset, uint64_t n,
                                        std::string* scratch) const;
};

// Maps `path` read-only. NOT_FOUND if it does not exist, FAILED_PRECONDITION if it is
// not a regular file, INTERNAL if mmap fails. An empty file maps to empty bytes.
absl::StatusOr<std::unique_ptr<ShardFile>> MapShardFile(const std::string& path);

// A resident file holding `bytes` (an object fetched whole; tests).
std::unique_ptr<ShardFile> MemoryShardFile(std::string path, std::string bytes);

// `file` itself when resident, else a MemoryShardFile with all of its bytes (read once).
absl::StatusOr<std::unique_ptr<ShardFile>> MakeResident(std::unique_ptr<ShardFile> file);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_SHARD_FILE_H_
