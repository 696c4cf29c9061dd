// The shard cache's disk tier (shard_cache.h): the cache directory's lock, its start-up
// scan, storing one entry file, and deleting evicted files without racing a new file of
// the same name. Which entries exist, their LRU order, limits and pins are ShardCache's
// policy; the entry file format is shard_cache_file.h's.
//
// Thread-safety: OpenCacheDir and StoreEntryFile are thread-safe (no shared state).
// CacheDirLock is single-owner. PendingDeletes is thread-safe.
#ifndef ZEPHON_DAEMON_STORAGE_SHARD_CACHE_DISK_H_
#define ZEPHON_DAEMON_STORAGE_SHARD_CACHE_DISK_H_

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/storage/shard_cache_file.h"

namespace zephon::storage {

// An exclusive flock on "<dir>/.lock": one daemon at a time uses a cache directory.
// Released (fd closed) on destruction or Reset; empty when default-constructed or moved
// from. Single-owner.
class CacheDirLock {
 public:
  CacheDirLock() = default;
  CacheDirLock(CacheDirLock&& other) noexcept;
  CacheDirLock& operator=(CacheDirLock&& other) noexcept;
  CacheDirLock(const CacheDirLock&) = delete;
  CacheDirLock& operator=(const CacheDirLock&) = delete;
  ~CacheDirLock() { Reset(); }

  bool held() const { return fd_ >= 0; }
  void Reset();

 private:
  friend absl::StatusOr<CacheDirLock> LockCacheDir(const std::string& dir);
  int fd_ = -1;
};

// Takes the lock of `dir` (which must exist), never through a symlink or hard link
// planted as "<dir>/.lock" (common/owned_path.h's rule).
// Errors: UNAVAILABLE when another process holds the lock ("flock held") or the lock
// file cannot be opened as ours (the reason of OpenOwnedFile). The caller's reaction:
// cache in memory and try again later.
absl::StatusOr<CacheDirLock> LockCacheDir(const std::string& dir);

// A cache directory as OpenCacheDir found it.
struct OpenedCacheDir {
  CacheDirLock lock;
  // Its valid entry files, oldest mtime first (least recently used first). Their
  // payload CRCs are not checked yet: check them on first use (MapEntryFile).
  std::vector<ScannedEntryFile> files;
  uint64_t rejected = 0;  // stray, torn or foreign files the scan deleted
};

// Makes `dir` (EnsureEntryDir), takes its lock (LockCacheDir), runs `before_scan` when
// set (tests), then scans it (ScanEntryDir: deletes temp files and invalid *.blk files).
// Runs file I/O only; call it without holding locks.
// Errors: EnsureEntryDir's (FAILED_PRECONDITION, PERMISSION_DENIED: the directory
// cannot be used; cache in memory) and LockCacheDir's (UNAVAILABLE: in use; retry).
absl::StatusOr<OpenedCacheDir> OpenCacheDir(const std::string& dir,
                                            const std::function<void()>& before_scan);

// Writes the entry file `path` of `identity` holding `payload` (WriteEntryFile) and maps
// it. *written is set once the file is in place, so on an error it tells a refused
// write (nothing left behind) from a failed mapping (the caller deletes the file).
// Errors: WriteEntryFile's (RESOURCE_EXHAUSTED: disk full; INTERNAL) and MapEntryFile's
// (RESOURCE_EXHAUSTED: mmap failed).
absl::StatusOr<EntryFileMap> StoreEntryFile(const std::string& path,
                                            const std::string& identity,
                                            const std::string& payload, bool* written);

// Entry files evicted but not deleted yet. The cache decides an eviction under its own
// mutex (Add) and deletes the files after releasing it (Delete); a writer of a new file
// of the same name first waits for the pending delete (WaitUntilDeleted), so the delete
// never removes the new file.
// Thread-safety: thread-safe. It never calls out while holding its mutex, so callers
// may hold theirs (lock order: the caller's mutex, then this one's).
class PendingDeletes {
 public:
  // Marks `path` as about to be deleted (counted: the same path may be added twice).
  void Add(const std::string& path) ABSL_LOCKS_EXCLUDED(mu_);
  // Unlinks each path (REQUIRES: each was Add'ed once per occurrence), then unmarks
  // them and wakes the waiters.
  void Delete(const std::vector<std::string>& paths) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until `path` is no longer pending. false: still pending at `deadline` (a delete
  // stuck on a hung filesystem); the caller must not write `path` then.
  bool WaitUntilDeleted(const std::string& path, absl::Time deadline) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  absl::Mutex mu_;
  absl::CondVar deleted_;
  std::unordered_map<std::string, int> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_SHARD_CACHE_DISK_H_
