#include "daemon/storage/shard_cache.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/storage/shard_cache_disk.h"
#include "daemon/storage/shard_cache_fetch.h"
#include "daemon/storage/shard_cache_file.h"

namespace zephon::storage {
namespace {

constexpr uint64_t kMaxBlockBytes = uint64_t{1} << 30;

}  // namespace

struct ShardCache::Entry {
  enum class State { kLoading, kReady, kFailed };

  std::string identity;
  // "<dir>/<name>.blk" when on disk (or about to be); "" when held in memory. Decides the
  // entry's charge pool and LRU; changes only while the entry loads (memory fallback).
  std::string path;
  uint64_t payload_bytes = 0;
  uint64_t charge = 0;  // bytes counted in its pool (disk_bytes_ or memory_bytes_)
  State state = State::kLoading;
  absl::Status error;  // kFailed: what the download returned
  int pins = 0;
  bool verified = true;  // false: adopted from disk, CRC not checked yet
  uint32_t crc = 0;      // adopted entries: the CRC their header promises
  // The payload: a whole-file mapping (payload after the header) or memory.
  EntryFileMap map;
  std::string memory;
  std::list<Entry*>::iterator lru_it;
  std::list<Entry*>::iterator mapped_it;
  bool in_lru = false;
  bool in_mapped_lru = false;

  const char* payload() const { return map.mapped() ? map.payload() : memory.data(); }
  bool has_payload() const { return map.mapped() || memory.size() == payload_bytes; }
};

absl::StatusOr<std::shared_ptr<ShardCache>> ShardCache::Create(ShardCacheOptions options) {
  if (options.block_bytes < 1 || options.block_bytes > kMaxBlockBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shard cache block_bytes=", options.block_bytes, " must be in [1, ", kMaxBlockBytes,
        "] (1 GiB)"));
  }
  if (options.max_mapped_entries < 1) {
    return absl::InvalidArgumentError("shard cache max_mapped_entries must be >= 1");
  }
  if (options.wait_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("shard cache wait_timeout must be positive");
  }
  if (options.lock_retry_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("shard cache lock_retry_interval must be positive");
  }
  while (options.dir.size() > 1 && options.dir.back() == '/') options.dir.pop_back();
  return std::shared_ptr<ShardCache>(new ShardCache(std::move(options)));
}

ShardCache::ShardCache(ShardCacheOptions options) : options_(std::move(options)) {
  const bool memory_only = options_.dir.empty() || options_.max_bytes == 0;
  absl::MutexLock lock(&mu_);
  disk_ = memory_only ? Disk::kMemoryOnly : Disk::kNotOpened;
  disk_settled_.store(memory_only, std::memory_order_release);
}

ShardCache::~ShardCache() {
  absl::MutexLock lock(&mu_);
  entries_.clear();
  disk_lru_.clear();
  memory_lru_.clear();
  mapped_lru_.clear();
  dir_lock_.Reset();
}

std::string ShardCache::ObjectId(const RemoteObject& object) {
  std::string id("zephon-shard-cache-v1");
  id.push_back('\0');
  id += object.store_id;
  id.push_back('\0');
  id += object.info.key;
  id.push_back('\0');
  id += object.info.version.empty()
            ? absl::StrCat("mtime:", absl::ToUnixNanos(object.info.mtime))
            : object.info.version;
  id.push_back('\0');
  absl::StrAppend(&id, object.info.size);
  return id;
}

absl::Status ShardCache::Read(ObjectStore& store, const RemoteObject& object, uint64_t offset,
                              uint64_t n, char* out) {
  const uint64_t size = object.info.size;
  if (offset > size || n > size - offset) {
    return absl::OutOfRangeError(absl::StrCat("read of bytes [", offset, ", ", offset + n,
                                              ") passes the end of ", object.url, " (", size,
                                              " bytes when the dataset was opened)"));
  }
  if (n == 0) return absl::OkStatus();
  const uint64_t span = size <= options_.block_bytes ? size : options_.block_bytes;
  uint64_t pos = offset;
  while (pos < offset + n) {
    const uint64_t block = pos / span;
    ASSIGN_OR_RETURN(std::shared_ptr<Entry> entry, Acquire(store, object, block));
    const uint64_t in_block = pos - block * span;
    const uint64_t take = std::min(offset + n - pos, entry->payload_bytes - in_block);
    std::memcpy(out + (pos - offset), entry->payload() + in_block, take);
    Release(entry);
    pos += take;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<ShardCache::Entry>> ShardCache::Acquire(
    ObjectStore& store, const RemoteObject& object, uint64_t block) {
  if (!disk_settled_.load(std::memory_order_acquire)) RETURN_IF_ERROR(EnsureDisk(object.url));
  const uint64_t size = object.info.size;
  const bool whole = size <= options_.block_bytes;
  const uint64_t span = whole ? size : options_.block_bytes;
  const uint64_t length = std::min(span, size - block * span);
  // The entry's identity, built in a per-thread buffer: this runs for every Read.
  thread_local std::string identity;
  identity.clear();
  if (object.cache_id.empty()) {
    identity = ObjectId(object);
  } else {
    identity.append(object.cache_id);
  }
  identity.push_back('\0');
  if (whole) {
    identity.append("whole");
  } else {
    absl::StrAppend(&identity, options_.block_bytes, ":", block);
  }

  std::shared_ptr<Entry> entry;
  bool try_file = false;
  std::vector<std::string> doomed;
  {
    absl::MutexLock lock(&mu_);
    // One deadline for all the waiting this Read does, however often the block is
    // evicted and fetched again meanwhile.
    const absl::Time deadline = absl::Now() + options_.wait_timeout;
    for (;;) {
      auto it = entries_.find(identity);
      if (it == entries_.end()) {  // a miss: this thread downloads
        entry = std::make_shared<Entry>();
        entry->identity = identity;
        entry->payload_bytes = length;
        if (disk_ == Disk::kOpen) {
          entry->path = absl::StrCat(options_.dir, "/", EntryFileName(identity));
          entry->charge = EntryHeaderBytes(identity) + length;
        } else {
          entry->charge = length;
        }
        entry->pins = 1;
        entries_.emplace(identity, entry);
        PoolLocked(*entry) += entry->charge;
        pinned_bytes_ += entry->charge;
        ++counters_.misses;
        EvictLocked(&doomed);
        break;
      }
      std::shared_ptr<Entry> found = it->second;
      if (found->state == Entry::State::kLoading) {  // join the download in flight
        ++counters_.waits;
        while (found->state == Entry::State::kLoading) {
          if (loaded_.WaitWithDeadline(&mu_, deadline) &&
              found->state == Entry::State::kLoading) {
            return absl::DeadlineExceededError(absl::StrCat(
                "waited ", absl::FormatDuration(options_.wait_timeout),
                " for another reader's download of ",
                whole ? "" : absl::StrCat("block ", block, " of "), object.url,
                " (is the object store reachable?)"));
          }
        }
        if (found->state == Entry::State::kFailed) return found->error;
        continue;  // ready now (or already evicted again): look it up afresh
      }
      const bool unused = found->pins++ == 0;
      if (unused) {
        pinned_bytes_ += found->charge;
        if (found->in_lru) LruLocked(*found).erase(found->lru_it);
        if (found->in_mapped_lru) mapped_lru_.erase(found->mapped_it);
        found->in_lru = found->in_mapped_lru = false;
      }
      if (!found->verified || !found->has_payload()) {
        // On disk but not mapped (adopted, or unmapped for the mapping budget): this
        // thread maps it (and checks an adopted file's CRC) while others wait. Unmapped
        // entries are never pinned, so this thread holds the only pin.
        found->state = Entry::State::kLoading;
        entry = std::move(found);
        try_file = true;
        break;
      }
      ++counters_.hits;
      return found;
    }
  }
  DeleteFiles(doomed);

  const uint64_t old_charge = entry->charge;
  const bool had_file = !entry->path.empty();
  bool from_file = false;
  const absl::Status loaded = Load(store, object, block, entry.get(), try_file, &from_file);
  absl::MutexLock lock(&mu_);
  if (!loaded.ok()) {
    entry->state = Entry::State::kFailed;
    entry->error = loaded;
    pinned_bytes_ -= old_charge;
    entry->pins = 0;
    RemoveLocked(entry.get(), /*doomed=*/nullptr);  // Load deleted any file it left
    ++counters_.errors;
    loaded_.SignalAll();
    return loaded;
  }
  if (try_file) ++(from_file ? counters_.hits : counters_.misses);
  if (had_file && entry->path.empty()) {
    // The directory refused the block (disk full, mmap failing): it is held in memory
    // now and charged against memory_bytes.
    disk_bytes_ -= old_charge;
    entry->charge = entry->payload_bytes;
    memory_bytes_ += entry->charge;
    pinned_bytes_ = pinned_bytes_ - old_charge + entry->charge;
  }
  if (entry->map.mapped()) ++mapped_;
  entry->state = Entry::State::kReady;
  entry->verified = true;
  loaded_.SignalAll();
  UnmapExcessLocked();
  return entry;
}

absl::Status ShardCache::Load(ObjectStore& store, const RemoteObject& object, uint64_t block,
                              Entry* entry, bool try_file, bool* from_file) {
  if (try_file) {
    // Any failure (another size, a CRC mismatch, even mmap failing) drops the file.
    absl::StatusOr<EntryFileMap> map =
        MapEntryFile(entry->path, entry->identity, entry->payload_bytes,
                     entry->verified ? std::nullopt : std::optional<uint32_t>(entry->crc));
    if (map.ok()) {
      entry->map = std::move(map).value();
      *from_file = true;
      return absl::OkStatus();
    }
    {
      absl::MutexLock lock(&mu_);
      ++counters_.rejected;
    }
    spdlog::warn("shard cache: {} is corrupt or short (for {}); fetching it again",
                 entry->path, object.url);
    unlink(entry->path.c_str());
  }
  ASSIGN_OR_RETURN(std::string payload,
                   FetchBlock(store, object.url, object.info, options_.block_bytes, block,
                              entry->payload_bytes, options_.verify_version));
  {
    absl::MutexLock lock(&mu_);
    ++counters_.downloads;
    counters_.bytes_downloaded += payload.size();
  }
  // An evicted file of the same name may not be deleted yet: do not write over it. A
  // delete stuck on a hung filesystem costs at most wait_timeout; then the block is
  // served from memory instead.
  if (!entry->path.empty() &&
      !deletes_.WaitUntilDeleted(entry->path, absl::Now() + options_.wait_timeout)) {
    entry->path.clear();
  }
  if (!entry->path.empty()) {
    bool written = false;
    absl::StatusOr<EntryFileMap> map =
        StoreEntryFile(entry->path, entry->identity, payload, &written);
    if (map.ok()) {
      entry->map = std::move(map).value();
      return absl::OkStatus();
    }
    const absl::Status& stored = map.status();
    // The bytes are good; only the directory refused them. Serve this block from memory
    // (charged against memory_bytes, evicted on its own LRU).
    if (!written && !warned_write_.exchange(true)) {
      spdlog::warn("shard cache: cannot store blocks in {} ({}); keeping such blocks in "
                   "memory, at most {} bytes of them (logged once; free disk space or lower "
                   "--shard-cache-bytes)",
                   options_.dir, stored.ToString(), options_.memory_bytes);
    } else if (written && !warned_map_.exchange(true)) {
      spdlog::warn("shard cache: cannot map entry files of {} ({}); keeping such blocks in "
                   "memory, at most {} bytes of them (logged once; check vm.max_map_count "
                   "and the daemon's memory limits)",
                   options_.dir, stored.ToString(), options_.memory_bytes);
    }
    if (written) unlink(entry->path.c_str());
    entry->path.clear();
  }
  entry->memory = std::move(payload);
  return absl::OkStatus();
}

void ShardCache::Release(const std::shared_ptr<Entry>& entry) {
  std::vector<std::string> doomed;
  {
    absl::MutexLock lock(&mu_);
    if (--entry->pins > 0) return;
    pinned_bytes_ -= entry->charge;
    auto it = entries_.find(entry->identity);
    if (it == entries_.end() || it->second != entry) return;  // not cached (cannot happen)
    std::list<Entry*>& lru = LruLocked(*entry);
    entry->lru_it = lru.insert(lru.end(), entry.get());
    entry->in_lru = true;
    if (entry->map.mapped()) {
      entry->mapped_it = mapped_lru_.insert(mapped_lru_.end(), entry.get());
      entry->in_mapped_lru = true;
    }
    EvictLocked(&doomed);
    UnmapExcessLocked();
  }
  DeleteFiles(doomed);
}

ShardCacheStats ShardCache::Stats() const {
  absl::MutexLock lock(&mu_);
  ShardCacheStats s = counters_;
  // The directory while it is (or may still become, on first use) the cache.
  const bool disk = disk_ == Disk::kNotOpened || disk_ == Disk::kOpen;
  s.dir = disk ? options_.dir : "";
  s.on_disk = disk_ == Disk::kOpen;
  s.limit_bytes = disk ? options_.max_bytes : options_.memory_bytes;
  s.block_bytes = options_.block_bytes;
  s.resident_bytes = disk_bytes_ + memory_bytes_;
  s.memory_resident_bytes = memory_bytes_;
  s.pinned_bytes = pinned_bytes_;
  s.entries = entries_.size();
  return s;
}

absl::Status ShardCache::EnsureDisk(const std::string& url) {
  bool retry = false;
  {
    absl::MutexLock lock(&mu_);
    if (!opening_ && (disk_ == Disk::kNotOpened ||
                      (disk_ == Disk::kLockBusy && absl::Now() >= next_lock_try_))) {
      opening_ = true;
      retry = disk_ == Disk::kLockBusy;
    } else {
      // A first-use scan in flight: wait for it, so that this Read can hit the files it
      // finds. (During a lock retry the cache keeps serving from memory instead.)
      const absl::Time deadline = absl::Now() + options_.wait_timeout;
      while (opening_ && disk_ == Disk::kNotOpened) {
        if (loaded_.WaitWithDeadline(&mu_, deadline) && opening_ &&
            disk_ == Disk::kNotOpened) {
          return absl::DeadlineExceededError(absl::StrCat(
              "waited ", absl::FormatDuration(options_.wait_timeout), " for the shard cache's "
              "scan of ", options_.dir, " before reading ", url, " (is the disk responding?)"));
        }
      }
      return absl::OkStatus();
    }
  }
  OpenDisk(retry);
  return absl::OkStatus();
}

void ShardCache::OpenDisk(bool retry) {
  // Fails for good (a directory that cannot be made) or for now (the lock is held).
  const auto give_up = [this](Disk disk) {
    absl::MutexLock lock(&mu_);
    disk_ = disk;
    opening_ = false;
    if (disk == Disk::kLockBusy) {
      next_lock_try_ = absl::Now() + options_.lock_retry_interval;
    } else {
      disk_settled_.store(true, std::memory_order_release);
    }
    loaded_.SignalAll();
  };
  absl::StatusOr<OpenedCacheDir> opened = OpenCacheDir(options_.dir, options_.TEST_before_scan);
  if (absl::IsUnavailable(opened.status())) {  // the lock is held (or not ours)
    if (!retry) {
      spdlog::warn("shard cache: {} is in use by another zephond ({}); this daemon caches "
                   "dataset blocks in memory only and tries again every {} (a predecessor "
                   "that is still exiting releases it; otherwise give each zephond its own "
                   "--cache-dir)",
                   options_.dir, std::string(opened.status().message()),
                   absl::FormatDuration(options_.lock_retry_interval));
    } else {
      spdlog::debug("shard cache: {} is still in use by another zephond ({})", options_.dir,
                    std::string(opened.status().message()));
    }
    give_up(Disk::kLockBusy);
    return;
  }
  if (!opened.ok()) {  // the directory cannot be made
    spdlog::error("shard cache: {}; caching in memory only (fix the directory or pass "
                  "another --cache-dir)", opened.status().ToString());
    give_up(Disk::kMemoryOnly);
    return;
  }
  const size_t adopted = opened->files.size();
  std::vector<std::string> doomed;
  uint64_t disk_bytes = 0;
  {
    absl::MutexLock lock(&mu_);
    dir_lock_ = std::move(opened->lock);
    disk_ = Disk::kOpen;
    opening_ = false;
    counters_.rejected += opened->rejected;
    AdoptLocked(std::move(opened->files), &doomed);
    EvictLocked(&doomed);
    disk_bytes = disk_bytes_;
    disk_settled_.store(true, std::memory_order_release);
    loaded_.SignalAll();
  }
  DeleteFiles(doomed);
  if (retry) {
    spdlog::info("shard cache: {} is free now; caching dataset blocks there (adopted {} "
                 "entries, {} bytes)", options_.dir, adopted, disk_bytes);
  } else if (adopted > 0) {
    spdlog::info("shard cache: adopted {} entries ({} bytes) from {}", adopted, disk_bytes,
                 options_.dir);
  }
}

void ShardCache::AdoptLocked(std::vector<ScannedEntryFile> files,
                             std::vector<std::string>* doomed) {
  for (ScannedEntryFile& file : files) {  // oldest first: the LRU's order
    if (entries_.count(file.header.identity) > 0) {
      // Cached in memory meanwhile (a lock retry): the file would be charged twice.
      DoomLocked(file.path, doomed);
      continue;
    }
    auto entry = std::make_shared<Entry>();
    entry->path = std::move(file.path);
    entry->identity = std::move(file.header.identity);
    entry->payload_bytes = file.header.payload_bytes;
    entry->charge = file.header.file_bytes;
    entry->state = Entry::State::kReady;
    entry->verified = false;
    entry->crc = file.header.crc;
    entry->lru_it = disk_lru_.insert(disk_lru_.end(), entry.get());
    entry->in_lru = true;
    disk_bytes_ += entry->charge;
    ++counters_.adopted;
    std::string identity = entry->identity;
    entries_.emplace(std::move(identity), std::move(entry));
  }
}

uint64_t& ShardCache::PoolLocked(const Entry& entry) {
  return entry.path.empty() ? memory_bytes_ : disk_bytes_;
}

std::list<ShardCache::Entry*>& ShardCache::LruLocked(const Entry& entry) {
  return entry.path.empty() ? memory_lru_ : disk_lru_;
}

void ShardCache::EvictLocked(std::vector<std::string>* doomed) {
  while (disk_bytes_ > options_.max_bytes && !disk_lru_.empty()) {
    RemoveLocked(disk_lru_.front(), doomed);
    ++counters_.evictions;
  }
  while (memory_bytes_ > options_.memory_bytes && !memory_lru_.empty()) {
    RemoveLocked(memory_lru_.front(), doomed);
    ++counters_.evictions;
  }
  const bool disk_over = disk_bytes_ > options_.max_bytes;
  if ((disk_over || memory_bytes_ > options_.memory_bytes) && !warned_over_limit_) {
    warned_over_limit_ = true;
    spdlog::warn("shard cache {} holds {} bytes, over its {}-byte limit, because {} bytes "
                 "are being read or downloaded; they are evicted once released (logged "
                 "once)", disk_over ? options_.dir : "(memory)",
                 disk_over ? disk_bytes_ : memory_bytes_,
                 disk_over ? options_.max_bytes : options_.memory_bytes, pinned_bytes_);
  }
}

void ShardCache::RemoveLocked(Entry* entry, std::vector<std::string>* doomed) {
  if (entry->in_lru) LruLocked(*entry).erase(entry->lru_it);
  if (entry->in_mapped_lru) mapped_lru_.erase(entry->mapped_it);
  entry->in_lru = entry->in_mapped_lru = false;
  if (entry->map.mapped()) --mapped_;
  if (doomed != nullptr && !entry->path.empty()) DoomLocked(entry->path, doomed);
  PoolLocked(*entry) -= entry->charge;
  // Waiters of a failed download may still hold the entry; the last reference unmaps.
  auto it = entries_.find(entry->identity);
  if (it != entries_.end() && it->second.get() == entry) entries_.erase(it);
}

void ShardCache::DoomLocked(const std::string& path, std::vector<std::string>* doomed) {
  deletes_.Add(path);
  doomed->push_back(path);
}

void ShardCache::DeleteFiles(const std::vector<std::string>& doomed) { deletes_.Delete(doomed); }

void ShardCache::UnmapExcessLocked() {
  while (mapped_ > options_.max_mapped_entries && !mapped_lru_.empty()) {
    Entry* e = mapped_lru_.front();
    mapped_lru_.pop_front();
    e->in_mapped_lru = false;
    e->map.Reset();
    --mapped_;
  }
}

}  // namespace zephon::storage
