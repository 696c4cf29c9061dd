// LocalStore: ObjectStore over a local (or network-mounted POSIX) directory. Key "a/b"
// is the file <root>/a/b; parent directories are created on Put.
//
// Atomicity: Put writes a temp file in the destination directory, fsyncs it, renames it
// over the destination and fsyncs the directory, so after a crash a key holds either
// its old or its new bytes. Temp files are named ".zephon-tmp.<name>.XXXXXX"; they are
// removed on every error path and List and ListDirectory skip them.
//
// Every read, listing, stat, write and delete goes through the Env given to Open
// (common/env.h), so a test can inject their faults; only Open's mkdir -p is POSIX.
//
// Errors carry the filesystem path and errno text. Thread-safety: thread-safe (no
// mutable state; the filesystem serializes).
#ifndef ZEPHON_DAEMON_STORAGE_LOCAL_STORE_H_
#define ZEPHON_DAEMON_STORAGE_LOCAL_STORE_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/atomic_file.h"
#include "common/env.h"
#include "daemon/storage/object_store.h"

namespace zephon::storage {

// Prefix of in-flight Put temp files (WriteFileAtomically's); List skips them.
inline constexpr const char* kLocalTempPrefix = kAtomicTempPrefix;

class LocalStore final : public ObjectStore {
 public:
  // Opens (creating with mkdir -p if missing) the directory `root`. INVALID_ARGUMENT if
  // `root` is empty; FAILED_PRECONDITION if it exists but is not a directory; the errno
  // mapping of mkdir otherwise. `env` must outlive the store.
  static absl::StatusOr<std::unique_ptr<LocalStore>> Open(const std::string& root,
                                                          Env* env = Env::Default());

  LocalStore(const LocalStore&) = delete;
  LocalStore& operator=(const LocalStore&) = delete;

  const std::string& root() const { return root_; }

  // Conditional reads (if_version non-empty) compare the version ("<size>-<mtime
  // ns>-<inode>", as Head reports it) of the file they opened (Env::OpenForRead), from
  // that open file, before reading; it pins the inode, so a Put (rename) racing the read
  // cannot mix versions. The open file is stat'ed again after the read, so a writer
  // rewriting the file in place (same inode) during the read also fails with
  // VersionMismatchError when it moved the size or mtime (best effort: mtime ticks at the
  // kernel's coarse clock).
  // Errors name the path.
  absl::StatusOr<std::string> Get(const std::string& key,
                                  const std::string& if_version = "") override;
  absl::StatusOr<std::string> GetRange(const std::string& key, uint64_t offset,
                                       uint64_t length,
                                       const std::string& if_version = "") override;
  absl::Status Put(const std::string& key, std::string_view bytes) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  // Reads the one directory holding `prefix`'s level (skipping temp files, as List
  // does); a subdirectory is a common prefix when some regular file lies under it (the
  // search stops at the first). A prefix whose directory part is no valid key ("a//",
  // "../x") lists nothing, as in List, and is never opened.
  absl::StatusOr<DirectoryListing> ListDirectory(const std::string& prefix) override;
  absl::Status Delete(const std::string& key) override;
  absl::StatusOr<ObjectInfo> Head(const std::string& key) override;

 private:
  LocalStore(std::string root, Env* env) : root_(std::move(root)), env_(env) {}

  std::string PathOf(const std::string& key) const { return root_ + "/" + key; }

  const std::string root_;  // no trailing '/' (except the root directory "/")
  Env* const env_;
};

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_LOCAL_STORE_H_
