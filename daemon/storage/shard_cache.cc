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

ShardCache::ShardCache(ShardCacheOptions options)
    : options_(std::move(options)),
      index_(BlockIndexOptions{options_.max_bytes, options_.memory_bytes,
                               options_.max_mapped_entries, options_.dir},
             &deletes_) {
  const bool memory_only = options_.dir.empty() || options_.max_bytes == 0;
  absl::MutexLock lock(&mu_);
  disk_ = memory_only ? Disk::kMemoryOnly : Disk::kNotOpened;
  disk_settled_.store(memory_only, std::memory_order_release);
}

ShardCache::~ShardCache() = default;

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
    ASSIGN_OR_RETURN(std::shared_ptr<CachedBlock> entry, Acquire(store, object, block));
    const uint64_t in_block = pos - block * span;
    const uint64_t take = std::min(offset + n - pos, entry->payload_bytes - in_block);
    std::memcpy(out + (pos - offset), entry->payload() + in_block, take);
    Release(entry);
    pos += take;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<CachedBlock>> ShardCache::Acquire(
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

  std::vector<std::string> doomed;
  // One deadline for all the waiting this Read does, however often the block is evicted
  // and fetched again meanwhile.
  absl::StatusOr<BlockIndex::Acquired> acquired = index_.Acquire(
      identity, length,
      [&] {
        return disk_open_.load(std::memory_order_acquire)
                   ? absl::StrCat(options_.dir, "/", EntryFileName(identity))
                   : std::string();
      },
      absl::Now() + options_.wait_timeout, options_.wait_timeout,
      [&] {
        return absl::StrCat(whole ? "" : absl::StrCat("block ", block, " of "), object.url);
      },
      &doomed);
  DeleteFiles(doomed);
  if (!acquired.ok()) return acquired.status();
  if (!acquired->load) return std::move(acquired->block);

  bool from_file = false;
  const absl::Status loaded =
      Load(store, object, block, acquired->block.get(), acquired->try_file, &from_file);
  index_.Loaded(*acquired, loaded, from_file);
  if (!loaded.ok()) return loaded;
  return std::move(acquired->block);
}

absl::Status ShardCache::Load(ObjectStore& store, const RemoteObject& object, uint64_t block,
                              CachedBlock* entry, bool try_file, bool* from_file) {
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

void ShardCache::Release(const std::shared_ptr<CachedBlock>& entry) {
  std::vector<std::string> doomed;
  index_.Release(entry, &doomed);
  DeleteFiles(doomed);
}

ShardCacheStats ShardCache::Stats() const {
  absl::MutexLock lock(&mu_);
  ShardCacheStats s = counters_;
  const BlockIndexCounts index = index_.Counts();
  s.hits = index.hits;
  s.misses = index.misses;
  s.waits = index.waits;
  s.evictions = index.evictions;
  s.errors = index.errors;
  s.adopted = index.adopted;
  // The directory while it is (or may still become, on first use) the cache.
  const bool disk = disk_ == Disk::kNotOpened || disk_ == Disk::kOpen;
  s.dir = disk ? options_.dir : "";
  s.on_disk = disk_ == Disk::kOpen;
  s.limit_bytes = disk ? options_.max_bytes : options_.memory_bytes;
  s.block_bytes = options_.block_bytes;
  s.resident_bytes = index.resident_bytes;
  s.memory_resident_bytes = index.memory_resident_bytes;
  s.pinned_bytes = index.pinned_bytes;
  s.entries = index.entries;
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
  // Published before the directory counts as open, so that no Read creates an entry
  // file while its identity may still be among the scanned ones.
  index_.Adopt(std::move(opened->files), &doomed);
  const BlockIndexCounts counts = index_.Counts();
  const uint64_t disk_bytes = counts.resident_bytes - counts.memory_resident_bytes;
  {
    absl::MutexLock lock(&mu_);
    dir_lock_ = std::move(opened->lock);
    disk_ = Disk::kOpen;
    disk_open_.store(true, std::memory_order_release);
    opening_ = false;
    counters_.rejected += opened->rejected;
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

void ShardCache::DeleteFiles(const std::vector<std::string>& doomed) { deletes_.Delete(doomed); }

}  // namespace zephon::storage
