#include "daemon/storage/block_index.h"

#include <utility>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"

namespace zephon::storage {

BlockIndex::BlockIndex(BlockIndexOptions options, PendingDeletes* deletes)
    : options_(std::move(options)), deletes_(deletes) {}

absl::StatusOr<BlockIndex::Acquired> BlockIndex::Acquire(
    const std::string& identity, uint64_t length, absl::FunctionRef<std::string()> new_path,
    absl::Time deadline,
    absl::Duration wait, absl::FunctionRef<std::string()> what,
    std::vector<std::string>* doomed) {
  absl::MutexLock lock(&mu_);
  for (;;) {
    auto it = blocks_.find(identity);
    if (it == blocks_.end()) {  // a miss: this caller loads it
      auto block = std::make_shared<CachedBlock>();
      block->identity = identity;
      block->path = new_path();
      block->payload_bytes = length;
      block->on_disk = !block->path.empty();
      block->charge = block->on_disk ? EntryHeaderBytes(identity) + length : length;
      block->pins = 1;
      blocks_.emplace(identity, block);
      PoolLocked(*block) += block->charge;
      pinned_bytes_ += block->charge;
      ++counts_.misses;
      EvictLocked(doomed);
      return Acquired{std::move(block), /*load=*/true, /*try_file=*/false};
    }
    std::shared_ptr<CachedBlock> found = it->second;
    if (found->state == CachedBlock::State::kLoading) {  // join the load in flight
      ++counts_.waits;
      while (found->state == CachedBlock::State::kLoading) {
        if (loaded_.WaitWithDeadline(&mu_, deadline) &&
            found->state == CachedBlock::State::kLoading) {
          return absl::DeadlineExceededError(
              absl::StrCat("waited ", absl::FormatDuration(wait),
                           " for another reader's download of ", what(),
                           " (is the object store reachable?)"));
        }
      }
      if (found->state == CachedBlock::State::kFailed) return found->error;
      continue;  // ready now (or already evicted again): look it up afresh
    }
    if (found->pins++ == 0) {
      pinned_bytes_ += found->charge;
      if (found->in_lru) LruLocked(*found).erase(found->lru_it);
      if (found->in_mapped_lru) mapped_lru_.erase(found->mapped_it);
      found->in_lru = found->in_mapped_lru = false;
    }
    if (!found->verified || !found->has_payload()) {
      // On disk but not mapped (adopted, or unmapped for the mapping budget): this
      // caller maps it (and checks an adopted file's CRC) while others wait. Unmapped
      // blocks are never pinned, so this caller holds the only pin.
      found->state = CachedBlock::State::kLoading;
      return Acquired{std::move(found), /*load=*/true, /*try_file=*/true};
    }
    ++counts_.hits;
    return Acquired{std::move(found), /*load=*/false, /*try_file=*/false};
  }
}

void BlockIndex::Loaded(const Acquired& acquired, const absl::Status& loaded, bool from_file) {
  CachedBlock* const block = acquired.block.get();
  absl::MutexLock lock(&mu_);
  if (!loaded.ok()) {
    block->state = CachedBlock::State::kFailed;
    block->error = loaded;
    pinned_bytes_ -= block->charge;
    block->pins = 0;
    RemoveLocked(block, /*doomed=*/nullptr);  // the loader deleted any file it left
    ++counts_.errors;
    loaded_.SignalAll();
    return;
  }
  if (acquired.try_file) ++(from_file ? counts_.hits : counts_.misses);
  if (block->on_disk && block->path.empty()) {
    // The directory refused the block (disk full, mmap failing): it is held in memory
    // now and charged against the memory pool.
    const uint64_t old_charge = block->charge;
    disk_bytes_ -= old_charge;
    block->on_disk = false;
    block->charge = block->payload_bytes;
    memory_bytes_ += block->charge;
    pinned_bytes_ = pinned_bytes_ - old_charge + block->charge;
  }
  if (block->map.mapped()) ++mapped_;
  block->state = CachedBlock::State::kReady;
  block->verified = true;
  loaded_.SignalAll();
  UnmapExcessLocked();
}

void BlockIndex::Release(const std::shared_ptr<CachedBlock>& block,
                         std::vector<std::string>* doomed) {
  absl::MutexLock lock(&mu_);
  if (--block->pins > 0) return;
  pinned_bytes_ -= block->charge;
  auto it = blocks_.find(block->identity);
  if (it == blocks_.end() || it->second != block) return;  // not indexed (cannot happen)
  std::list<CachedBlock*>& lru = LruLocked(*block);
  block->lru_it = lru.insert(lru.end(), block.get());
  block->in_lru = true;
  if (block->map.mapped()) {
    block->mapped_it = mapped_lru_.insert(mapped_lru_.end(), block.get());
    block->in_mapped_lru = true;
  }
  EvictLocked(doomed);
  UnmapExcessLocked();
}

void BlockIndex::Adopt(std::vector<ScannedEntryFile> files, std::vector<std::string>* doomed) {
  absl::MutexLock lock(&mu_);
  for (ScannedEntryFile& file : files) {  // oldest first: the LRU's order
    if (blocks_.count(file.header.identity) > 0) {
      // Cached in memory meanwhile (a lock retry): the file would be charged twice.
      deletes_->Add(file.path);
      doomed->push_back(std::move(file.path));
      continue;
    }
    auto block = std::make_shared<CachedBlock>();
    block->path = std::move(file.path);
    block->identity = std::move(file.header.identity);
    block->payload_bytes = file.header.payload_bytes;
    block->on_disk = true;
    block->charge = file.header.file_bytes;
    block->state = CachedBlock::State::kReady;
    block->verified = false;
    block->crc = file.header.crc;
    block->lru_it = disk_lru_.insert(disk_lru_.end(), block.get());
    block->in_lru = true;
    disk_bytes_ += block->charge;
    ++counts_.adopted;
    std::string identity = block->identity;
    blocks_.emplace(std::move(identity), std::move(block));
  }
  EvictLocked(doomed);
}

BlockIndexCounts BlockIndex::Counts() const {
  absl::MutexLock lock(&mu_);
  BlockIndexCounts c = counts_;
  c.entries = blocks_.size();
  c.resident_bytes = disk_bytes_ + memory_bytes_;
  c.memory_resident_bytes = memory_bytes_;
  c.pinned_bytes = pinned_bytes_;
  return c;
}

uint64_t& BlockIndex::PoolLocked(const CachedBlock& block) {
  return block.on_disk ? disk_bytes_ : memory_bytes_;
}

std::list<CachedBlock*>& BlockIndex::LruLocked(const CachedBlock& block) {
  return block.on_disk ? disk_lru_ : memory_lru_;
}

void BlockIndex::EvictLocked(std::vector<std::string>* doomed) {
  while (disk_bytes_ > options_.max_disk_bytes && !disk_lru_.empty()) {
    RemoveLocked(disk_lru_.front(), doomed);
    ++counts_.evictions;
  }
  while (memory_bytes_ > options_.max_memory_bytes && !memory_lru_.empty()) {
    RemoveLocked(memory_lru_.front(), doomed);
    ++counts_.evictions;
  }
  const bool disk_over = disk_bytes_ > options_.max_disk_bytes;
  if ((disk_over || memory_bytes_ > options_.max_memory_bytes) && !warned_over_limit_) {
    warned_over_limit_ = true;
    spdlog::warn("shard cache {} holds {} bytes, over its {}-byte limit, because {} bytes "
                 "are being read or downloaded; they are evicted once released (logged "
                 "once)", disk_over ? options_.dir : "(memory)",
                 disk_over ? disk_bytes_ : memory_bytes_,
                 disk_over ? options_.max_disk_bytes : options_.max_memory_bytes,
                 pinned_bytes_);
  }
}

void BlockIndex::RemoveLocked(CachedBlock* block, std::vector<std::string>* doomed) {
  if (block->in_lru) LruLocked(*block).erase(block->lru_it);
  if (block->in_mapped_lru) mapped_lru_.erase(block->mapped_it);
  block->in_lru = block->in_mapped_lru = false;
  if (block->map.mapped()) --mapped_;
  if (doomed != nullptr && block->on_disk) {
    deletes_->Add(block->path);
    doomed->push_back(block->path);
  }
  PoolLocked(*block) -= block->charge;
  // Waiters of a failed load may still hold the block; the last reference unmaps.
  auto it = blocks_.find(block->identity);
  if (it != blocks_.end() && it->second.get() == block) blocks_.erase(it);
}

void BlockIndex::UnmapExcessLocked() {
  while (mapped_ > options_.max_mapped_entries && !mapped_lru_.empty()) {
    CachedBlock* b = mapped_lru_.front();
    mapped_lru_.pop_front();
    b->in_mapped_lru = false;
    b->map.Reset();
    --mapped_;
  }
}

}  // namespace zephon::storage
