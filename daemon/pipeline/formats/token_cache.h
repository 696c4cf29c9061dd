// TokenCache: the budget of the node-wide token cache directory (zephond's --cache-dir,
// --token-cache-bytes), where JsonlShard keeps each converted shard (jsonl_reader.h).
//
// Entries. An entry is the file group <dir>/<key>.off + <key>.tok (+ <key>.stats,
// <key>.msk, a loss mask, and <key>.pay + <key>.pao, the source records of keep_payload,
// when present), committed by the rename of .off. Its size is the sum of those files; its last
// use is the .off mtime, which Pin::Hit and Pin::Built set (strictly increasing within a
// process), so the LRU order survives a daemon restart.
//
// Create checks that the directory can be listed and returns; the scan runs on a thread
// of its own (a stat per file: ~15 ms per thousand entries on a small VM, which zephond
// would otherwise add to its start, before it listens), and Acquire and Stats wait for
// it. The scan (a missing directory is empty): committed entries are adopted,
// temporary files "<key>.{off,tok,stats}.tmp.<pid>.*" older than kOrphanGrace whose
// process is gone are deleted, and so are <key>.tok/.stats files without their .off once
// older than kOrphanGrace (an eviction or a build cut short; a build in flight commits
// its .off right after its .tok) and a lone .off; orphans only where the key is
// lowercase hex, as cache keys are. Then it evicts down to the budget (the flag may have
// shrunk).
//
// Use. Acquire(key) pins the entry (it need not exist yet) before the files are opened;
// the caller then reports Hit() (found committed) or Built() (just committed). After each
// Built() and each last unpin while over budget, least recently used UNPINNED entries
// are evicted until the total is within the budget: .off is deleted first, then .tok and
// .stats, so a concurrent opener sees "missing" and rebuilds, never a torn pair. Pinned
// entries are never evicted; when they alone exceed the budget that is logged once per
// episode and Stats().over_budget is set.
//
// Several zephonds on one directory each enforce the budget over the entries they know
// (they do not lock the directory); a reader of an entry another process deletes keeps
// reading its open files.
//
// Thread-safety: thread-safe. File deletions and mtime updates run under the mutex, so
// an entry is never deleted between another thread's Acquire and its open.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_TOKEN_CACHE_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_TOKEN_CACHE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

namespace zephon::pipeline {

// Counters since Create, sizes now.
struct TokenCacheStats {
  std::string dir;
  uint64_t entries = 0;       // committed entries
  uint64_t bytes = 0;         // their files
  uint64_t budget_bytes = 0;  // 0 = unlimited
  uint64_t pinned_bytes = 0;  // of committed entries in use (never evicted)
  bool over_budget = false;   // pinned entries alone exceed the budget
  uint64_t hits = 0;          // opens that found the entry committed
  uint64_t misses = 0;        // opens that built it
  uint64_t bytes_built = 0;
  uint64_t evictions = 0;
  uint64_t evicted_bytes = 0;
  uint64_t adopted = 0;        // entries found by the start-up scan
  uint64_t stale_removed = 0;  // dead temporary files and orphans the scan deleted
};

class TokenCache : public std::enable_shared_from_this<TokenCache> {
 public:
  // A .tok/.stats file without its .off is deleted by the scan once this old.
  static constexpr absl::Duration kOrphanGrace = absl::Minutes(10);

  // One use of an entry: pins it until destroyed. Move-only; a default-constructed Pin
  // (no managed cache) ignores Hit/Built.
  class Pin {
   public:
    Pin() = default;
    Pin(Pin&& other) noexcept { *this = std::move(other); }
    Pin& operator=(Pin&& other) noexcept;
    Pin(const Pin&) = delete;
    Pin& operator=(const Pin&) = delete;
    ~Pin() { Release(); }

    // The entry was found committed: a hit; it becomes the most recently used.
    void Hit();
    // The entry was just committed by this process: a miss; it is sized from its files,
    // becomes the most recently used, and the cache evicts down to its budget.
    void Built();
    const std::string& key() const { return key_; }

   private:
    friend class TokenCache;
    Pin(std::shared_ptr<TokenCache> cache, std::string key)
        : cache_(std::move(cache)), key_(std::move(key)) {}
    void Release();

    std::shared_ptr<TokenCache> cache_;
    std::string key_;
  };

  // Starts the scan of `dir` (see above). budget_bytes 0 = unlimited. Errors:
  // PERMISSION_DENIED / INTERNAL naming the directory when it exists but cannot be
  // listed (checked here; a later failure of the scan is logged, and the cache starts
  // empty).
  static absl::StatusOr<std::shared_ptr<TokenCache>> Create(std::string dir,
                                                            uint64_t budget_bytes);

  TokenCache(const TokenCache&) = delete;
  TokenCache& operator=(const TokenCache&) = delete;
  ~TokenCache();  // waits for the scan

  // Pins the entry `key` (the file name of <dir>/<key>.off without the suffix). Waits
  // for the start-up scan.
  Pin Acquire(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits for the start-up scan.
  TokenCacheStats Stats() const ABSL_LOCKS_EXCLUDED(mu_);
  const std::string& dir() const { return dir_; }

 private:
  struct Entry {
    uint64_t bytes = 0;        // 0 until committed
    int64_t last_use_ns = 0;   // the .off mtime
    uint32_t pins = 0;
    bool committed = false;
  };

  TokenCache(std::string dir, uint64_t budget_bytes);
  absl::Status Scan() ABSL_LOCKS_EXCLUDED(mu_);
  void Hit(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);
  void Built(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);
  void Unpin(const std::string& key) ABSL_LOCKS_EXCLUDED(mu_);
  // Sizes `e` from its files and adds it to the total (re-sizes a committed one).
  void CommitLocked(const std::string& key, Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks `e` used now and writes that into its .off mtime.
  void TouchLocked(const std::string& key, Entry& e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts least recently used unpinned entries until within the budget.
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string PathOf(const std::string& key, const char* suffix) const;

  const std::string dir_;
  const uint64_t budget_bytes_;

  mutable absl::Mutex mu_;
  std::map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // Committed unpinned entries by (last use, key): eviction order.
  std::set<std::pair<int64_t, std::string>> lru_ ABSL_GUARDED_BY(mu_);
  int64_t last_stamp_ns_ ABSL_GUARDED_BY(mu_) = 0;
  bool warned_over_budget_ ABSL_GUARDED_BY(mu_) = false;
  TokenCacheStats stats_ ABSL_GUARDED_BY(mu_);  // counters and committed totals
  absl::Notification scanned_;  // the start-up scan ended (successfully or not)
  std::thread scanner_;         // runs Scan(); joined by the destructor
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_TOKEN_CACHE_H_
