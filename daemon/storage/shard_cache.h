// ShardCache: the node-local cache of dataset bytes read from object stores (s3://),
// one per zephond and shared by every pipeline instance on the node. Readers ask for
// byte ranges of a remote object; the cache serves them from its blocks and downloads
// the missing ones. This class maps reads to blocks and runs the directory's state
// (open, memory only, lock retry); the parts it composes own their details:
//   block_index.h        the blocks: LRUs, limits, pins, single flight (no I/O)
//   shard_cache_fetch.h  one download: conditional on the version seen at open, checked
//                        against the length seen at open
//   shard_cache_file.h   the entry file format, its name (SHA-256 of the identity), CRC
//   shard_cache_disk.h   the directory's lock and start-up scan, storing entry files,
//                        deleting evicted ones
//
// Blocks. An object of at most block_bytes is one whole-object entry; a larger one is
// cut into block_bytes blocks. An entry's identity is (store id, key, version, size,
// block), so a changed object never hits the old object's entries.
//
// Disk. options.dir is opened on the first Read (Reads arriving meanwhile wait for the
// scan, at most wait_timeout); its valid entries are adopted, least recently used =
// oldest mtime. When another zephond holds the directory's lock the cache runs in
// memory and retries every lock_retry_interval.
//
// Limits. Entry files are charged against max_bytes; blocks held in memory (no disk
// cache, or the directory refused them: disk full, mmap failing) against memory_bytes,
// each with its own LRU. Entries being read or downloaded are pinned and never evicted,
// so a limit can be exceeded by the pinned bytes (logged once) until they are released.
//
// Single flight. Concurrent Reads missing one block share one download; the others wait
// (at most wait_timeout) and get its bytes or its error. A failed download leaves no
// entry.
//
// Thread-safety: thread-safe. Downloads and file I/O run outside every mutex; only
// munmap of mappings being dropped runs under the index's.
#ifndef ZEPHON_DAEMON_STORAGE_SHARD_CACHE_H_
#define ZEPHON_DAEMON_STORAGE_SHARD_CACHE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/storage/block_index.h"
#include "daemon/storage/object_store.h"
#include "daemon/storage/shard_cache_disk.h"
#include "daemon/storage/shard_cache_file.h"

namespace zephon::storage {

struct ShardCacheOptions {
  // Directory of the on-disk entries (zephond: <cache_dir>/objects), created 0700 on
  // first use. Empty: memory only.
  std::string dir;
  // Byte limit of the on-disk entries. 0: memory only.
  uint64_t max_bytes = uint64_t{16} << 30;
  // Block size of large objects; objects up to this size are whole-object entries.
  uint64_t block_bytes = uint64_t{8} << 20;
  // Byte limit of the blocks held in memory (no disk cache, or the directory refused
  // them).
  uint64_t memory_bytes = uint64_t{64} << 20;
  // Download blocks with a conditional read of the version seen at open (if_version;
  // no extra request) and fail on a change. false: only the length is checked.
  bool verify_version = true;
  // Longest wait for another reader's download of the same block.
  absl::Duration wait_timeout = absl::Minutes(10);
  // Most entries kept memory-mapped at once (each is a VMA; unpinned mappings beyond
  // this are unmapped least recent first and mapped again on use).
  int max_mapped_entries = 4096;
  // How often a daemon that found dir locked by another zephond tries the lock again.
  absl::Duration lock_retry_interval = absl::Seconds(30);
  // Tests only: runs when the directory is about to be scanned (outside the mutex).
  std::function<void()> TEST_before_scan;
};

// One object as the dataset saw it when it was opened.
struct RemoteObject {
  // Identifies the store for the cache ("s3://bucket@endpoint"); part of entry names.
  std::string store_id;
  // The object's URL, for messages ("s3://bucket/key").
  std::string url;
  // key (as passed to the store), size, mtime and version at open.
  ObjectInfo info;
  // ShardCache::ObjectId(*this), set once when the object is opened so that Reads do
  // not rebuild it; "" = rebuilt on every Read.
  std::string cache_id;
};

struct ShardCacheStats {
  // Until the first Read opens the directory: the configured dir and max_bytes. Once
  // memory only (configured so, the directory failed or is locked by another daemon):
  // "" and memory_bytes.
  std::string dir;
  bool on_disk = false;  // the directory is open and holds the entries
  uint64_t limit_bytes = 0;
  uint64_t block_bytes = 0;
  uint64_t resident_bytes = 0;  // charged bytes of every entry (files incl. headers)
  uint64_t memory_resident_bytes = 0;  // of which blocks held in memory
  uint64_t pinned_bytes = 0;    // of entries being read or downloaded
  uint64_t entries = 0;
  uint64_t hits = 0;     // block lookups served by a resident entry (or its file)
  uint64_t misses = 0;   // block lookups that started a download
  uint64_t waits = 0;    // block lookups that joined another reader's download
  uint64_t downloads = 0;         // successful GETs
  uint64_t bytes_downloaded = 0;  // their payload bytes
  uint64_t evictions = 0;
  uint64_t errors = 0;    // failed downloads
  uint64_t adopted = 0;   // entries found on disk at open (warm restart)
  uint64_t rejected = 0;  // corrupt, short or stray files deleted
};

class ShardCache {
 public:
  // Checks the options (INVALID_ARGUMENT naming the bad one: block_bytes in
  // [1, 1 GiB], max_mapped_entries >= 1, positive wait_timeout and lock_retry_interval).
  // No I/O: the directory is opened by the first Read.
  static absl::StatusOr<std::shared_ptr<ShardCache>> Create(ShardCacheOptions options);

  ShardCache(const ShardCache&) = delete;
  ShardCache& operator=(const ShardCache&) = delete;
  ~ShardCache();

  // Copies bytes [offset, offset + n) of `object` into out[0, n), downloading the blocks
  // it spans from `store` when they are not cached.
  // REQUIRES: `store` is the store `object` came from.
  // Errors (each names the object's URL and block): OUT_OF_RANGE when the range passes
  // object.info.size; the store's error for a failed download (S3Store's name bucket,
  // key and HTTP status); DATA_LOSS when the store returns another length than the
  // object had at open; FAILED_PRECONDITION ("changed since the dataset was opened")
  // when the store reports another version than the one seen at open;
  // (also for a range the store says is past the object's end); DEADLINE_EXCEEDED after
  // wait_timeout spent waiting for another reader's download or the directory scan.
  // The caller's reaction: the dataset is unreadable as opened; fail the pipeline.
  absl::Status Read(ObjectStore& store, const RemoteObject& object, uint64_t offset,
                    uint64_t n, char* out) ABSL_LOCKS_EXCLUDED(mu_);

  // The object's part of its entries' identity: store id, key, version (or mtime when
  // the store has none) and size.
  static std::string ObjectId(const RemoteObject& object);

  ShardCacheStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);
  const ShardCacheOptions& options() const { return options_; }

 private:
  explicit ShardCache(ShardCacheOptions options);

  // The block `block` of `object`, pinned and holding its payload.
  absl::StatusOr<std::shared_ptr<CachedBlock>> Acquire(ObjectStore& store,
                                                       const RemoteObject& object,
                                                       uint64_t block) ABSL_LOCKS_EXCLUDED(mu_);
  void Release(const std::shared_ptr<CachedBlock>& entry) ABSL_LOCKS_EXCLUDED(mu_);
  // Fills a block the index handed this thread to load: an adopted or unmapped file that
  // maps (and passes its CRC; *from_file = true), else a download, stored as an entry
  // file when the block has a path (cleared when the directory refuses it).
  absl::Status Load(ObjectStore& store, const RemoteObject& object, uint64_t block,
                    CachedBlock* entry, bool try_file, bool* from_file) ABSL_LOCKS_EXCLUDED(mu_);

  // Opens the directory when it is due (first use, or a lock retry) and waits for a
  // first-use scan another reader runs. DEADLINE_EXCEEDED after wait_timeout.
  absl::Status EnsureDisk(const std::string& url) ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the lock, scans the directory and publishes its entries (or records why not).
  void OpenDisk(bool retry) ABSL_LOCKS_EXCLUDED(mu_);
  // Deletes evicted files (marked in deletes_ by the index); call without locks held.
  void DeleteFiles(const std::vector<std::string>& doomed) ABSL_LOCKS_EXCLUDED(mu_);

  enum class Disk { kNotOpened, kOpen, kLockBusy, kMemoryOnly };

  const ShardCacheOptions options_;
  // Evicted files not deleted yet (a new file of the same name waits for them).
  PendingDeletes deletes_;
  // The blocks: LRUs, limits, pins, single flight. Its own mutex (lock order: mu_, then
  // the index's).
  BlockIndex index_;

  mutable absl::Mutex mu_;
  absl::CondVar loaded_;  // a directory scan finished (or gave up)
  Disk disk_ ABSL_GUARDED_BY(mu_);
  bool opening_ ABSL_GUARDED_BY(mu_) = false;  // a thread runs OpenDisk
  absl::Time next_lock_try_ ABSL_GUARDED_BY(mu_);  // kLockBusy
  CacheDirLock dir_lock_ ABSL_GUARDED_BY(mu_);    // held while kOpen
  // The I/O counters of Stats() (downloads, bytes_downloaded, rejected); the block
  // counters are the index's.
  ShardCacheStats counters_ ABSL_GUARDED_BY(mu_);
  // Written under mu_ when disk_ becomes kOpen or kMemoryOnly (final); read without it.
  std::atomic<bool> disk_settled_{false};
  // Written under mu_ when disk_ becomes kOpen (final): new blocks get entry files.
  std::atomic<bool> disk_open_{false};
  std::atomic<bool> warned_write_{false};  // a write into dir failed (logged once)
  std::atomic<bool> warned_map_{false};    // mapping an entry file failed (logged once)
};

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_SHARD_CACHE_H_
