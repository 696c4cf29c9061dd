// BlockIndex: the shard cache's in-memory index of blocks (shard_cache.h): identity ->
// block, pins, the byte charges and LRUs of the two pools (entry files against
// max_disk_bytes, blocks held in memory against max_memory_bytes), the mapping budget,
// and single flight (one load per missing block; other readers wait for it, with a
// deadline). It does no I/O: the caller loads a block it is handed with load = true and
// reports the outcome (Loaded); files of evicted blocks are marked in PendingDeletes
// and returned in *doomed for the caller to delete once it holds no lock.
//
// Thread-safety: thread-safe. Lock order: this index's mutex, then PendingDeletes'.
#ifndef ZEPHON_DAEMON_STORAGE_BLOCK_INDEX_H_
#define ZEPHON_DAEMON_STORAGE_BLOCK_INDEX_H_

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/storage/shard_cache_disk.h"
#include "daemon/storage/shard_cache_file.h"

namespace zephon::storage {

struct BlockIndexOptions {
  uint64_t max_disk_bytes = 0;    // charge limit of blocks with an entry file
  uint64_t max_memory_bytes = 0;  // charge limit of blocks held in memory
  int max_mapped_entries = 1;     // unpinned mappings beyond this are unmapped
  std::string dir;                // names the disk pool in the over-limit log line
};

// One cached block. The loader (the Acquire caller handed load = true) fills map or
// memory, and may clear path (the directory refused the file: held in memory) before
// calling Loaded; afterwards the block is read-only while pinned.
struct CachedBlock {
  std::string identity;
  std::string path;  // "<dir>/<name>.blk", or "" when held in memory
  uint64_t payload_bytes = 0;
  bool verified = true;  // false: adopted from disk, CRC not checked yet
  uint32_t crc = 0;      // adopted blocks: the CRC their header promises
  EntryFileMap map;      // the payload: a whole-file mapping, or
  std::string memory;    // the payload in memory

  const char* payload() const { return map.mapped() ? map.payload() : memory.data(); }
  bool has_payload() const { return map.mapped() || memory.size() == payload_bytes; }

 private:
  friend class BlockIndex;
  enum class State { kLoading, kReady, kFailed };
  State state = State::kLoading;
  absl::Status error;     // kFailed: what the load returned
  uint64_t charge = 0;    // bytes counted in its pool
  bool on_disk = false;   // its pool: disk (true) or memory
  int pins = 0;
  std::list<CachedBlock*>::iterator lru_it;
  std::list<CachedBlock*>::iterator mapped_it;
  bool in_lru = false;
  bool in_mapped_lru = false;
};

struct BlockIndexCounts {
  uint64_t entries = 0;
  uint64_t resident_bytes = 0;         // charges of both pools
  uint64_t memory_resident_bytes = 0;  // of the memory pool
  uint64_t pinned_bytes = 0;
  uint64_t hits = 0;       // served by a ready block (or its file)
  uint64_t misses = 0;     // started a download
  uint64_t waits = 0;      // joined another reader's load
  uint64_t evictions = 0;
  uint64_t errors = 0;     // failed loads
  uint64_t adopted = 0;    // entry files published by Adopt
};

class BlockIndex {
 public:
  // REQUIRES: deletes outlives the index.
  BlockIndex(BlockIndexOptions options, PendingDeletes* deletes);
  BlockIndex(const BlockIndex&) = delete;
  BlockIndex& operator=(const BlockIndex&) = delete;

  struct Acquired {
    std::shared_ptr<CachedBlock> block;  // pinned
    // true: this caller loads the block, then calls Loaded (the others wait meanwhile);
    // try_file: from its entry file (adopted, or unmapped for the mapping budget).
    bool load = false;
    bool try_file = false;
  };

  // The block of `identity`, pinned: ready, or missing (a new block of `length` bytes,
  // on new_path() or, when that is "", in memory; called only on a miss) or unmapped,
  // for this caller to load. Waits for a load
  // in flight until `deadline`. Evictions its charge causes add to *doomed.
  // Errors: DEADLINE_EXCEEDED ("waited <wait> for another reader's download of <what()>");
  // the error of the load it waited for. The caller's reaction: fail the read.
  absl::StatusOr<Acquired> Acquire(const std::string& identity, uint64_t length,
                                   absl::FunctionRef<std::string()> new_path,
                                   absl::Time deadline,
                                   absl::Duration wait, absl::FunctionRef<std::string()> what,
                                   std::vector<std::string>* doomed) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the load of `acquired` (load = true). Not OK: the block is dropped (its waiters
  // get `loaded`; any file is the loader's to delete) and unpinned. OK: the block is
  // ready and stays pinned; from_file says a try_file load used the file (a hit) rather
  // than downloading (a miss).
  void Loaded(const Acquired& acquired, const absl::Status& loaded, bool from_file)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Unpins a ready block; at zero pins it becomes the most recently used of its pool.
  void Release(const std::shared_ptr<CachedBlock>& block, std::vector<std::string>* doomed)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Publishes scanned entry files (oldest first: least recently used first) as ready,
  // unverified blocks; a file whose identity is indexed already is doomed. Then evicts
  // down to the limits.
  void Adopt(std::vector<ScannedEntryFile> files, std::vector<std::string>* doomed)
      ABSL_LOCKS_EXCLUDED(mu_);

  BlockIndexCounts Counts() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void EvictLocked(std::vector<std::string>* doomed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RemoveLocked(CachedBlock* block, std::vector<std::string>* doomed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnmapExcessLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t& PoolLocked(const CachedBlock& block) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::list<CachedBlock*>& LruLocked(const CachedBlock& block)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const BlockIndexOptions options_;
  PendingDeletes* const deletes_;

  mutable absl::Mutex mu_;
  absl::CondVar loaded_;  // a loading block became ready or failed
  std::unordered_map<std::string, std::shared_ptr<CachedBlock>> blocks_ ABSL_GUARDED_BY(mu_);
  // Unpinned ready blocks with a file / in memory, least recently released first.
  std::list<CachedBlock*> disk_lru_ ABSL_GUARDED_BY(mu_);
  std::list<CachedBlock*> memory_lru_ ABSL_GUARDED_BY(mu_);
  // Unpinned ready blocks that hold a mapping, least recently released first.
  std::list<CachedBlock*> mapped_lru_ ABSL_GUARDED_BY(mu_);
  int mapped_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t disk_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t memory_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t pinned_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool warned_over_limit_ ABSL_GUARDED_BY(mu_) = false;
  BlockIndexCounts counts_ ABSL_GUARDED_BY(mu_);  // the event counters
};

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_BLOCK_INDEX_H_
