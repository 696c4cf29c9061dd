// ShardFile: read-only random access to the bytes of one shard file, the storage seam
// of the readers.
//
// Three kinds: resident files, whose bytes are one contiguous in-memory range valid for
// the object's lifetime (data() != nullptr: a small object fetched whole, an index read
// once); local files, read with pread(2) on demand; and remote files, whose ranges are
// copied out on demand through the node's shard cache (remote_files.h). Readers call
// View(): a pointer into data() for resident files, a ReadAt into the caller's scratch
// buffer otherwise.
// Local files are deliberately not mmap'ed: dataset files belong to other users and
// data-sync jobs rewrite them in place, and touching a mapped page past a shrunk file's
// end raises SIGBUS, which would kill zephond and every ring on the node. With pread a
// file shrunk while open is a short read, reported as DATA_LOSS naming the file and the
// offset, and only the instance reading it fails. Sequential reads of a local file are
// served from a per-thread read-ahead block (256 KiB, one pread); bytes a thread read
// ahead before the file shrank may still be served, anything past them fails as above.
// Thread-safe: ReadAt/View may be called concurrently (pread has no file position).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_SHARD_FILE_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_SHARD_FILE_H_

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
  // the range passes size(); local files: DATA_LOSS naming the file and offset when it
  // was shrunk since Open (the caller fails its instance; retrying cannot help),
  // INTERNAL on an I/O error; remote files fail as the shard cache does (naming the URL,
  // bucket, key and HTTP status).
  virtual absl::Status ReadAt(uint64_t offset, uint64_t n, char* out) const = 0;
  // All size() bytes, contiguous and valid for the object's lifetime; nullptr when the
  // file is not resident (OpenLocalShardFile, remote files). Never nullptr for
  // MemoryShardFile and MakeResident's result.
  virtual const char* data() const { return nullptr; }

  // Bytes [offset, offset + n): into data() when resident, else read into *scratch.
  // Valid until *scratch changes or the file is destroyed. Errors as ReadAt.
  absl::StatusOr<std::string_view> View(uint64_t offset, uint64_t n,
                                        std::string* scratch) const;
};

// Opens the local file `path` for pread-based reads; size() is its size now. The file
// descriptor (O_CLOEXEC) is held until the object is destroyed. NOT_FOUND if it does not
// exist, PERMISSION_DENIED if it cannot be opened, FAILED_PRECONDITION if it is not a
// regular file.
absl::StatusOr<std::unique_ptr<ShardFile>> OpenLocalShardFile(const std::string& path);

// A resident file holding `bytes` (an object fetched whole; tests).
std::unique_ptr<ShardFile> MemoryShardFile(std::string path, std::string bytes);

// `file` itself when resident, else a MemoryShardFile with all of its bytes (read once).
absl::StatusOr<std::unique_ptr<ShardFile>> MakeResident(std::unique_ptr<ShardFile> file);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_SHARD_FILE_H_
