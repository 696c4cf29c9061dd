#include "daemon/storage/block_index.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/temp_dir_testing.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

constexpr absl::Duration kWait = absl::Seconds(60);

BlockIndexOptions Options(uint64_t disk, uint64_t memory) {
  BlockIndexOptions o;
  o.max_disk_bytes = disk;
  o.max_memory_bytes = memory;
  o.max_mapped_entries = 4;
  o.dir = "/cache";
  return o;
}

absl::StatusOr<BlockIndex::Acquired> Get(BlockIndex& index, const std::string& id,
                                         uint64_t length, const std::string& path,
                                         std::vector<std::string>* doomed,
                                         absl::Duration wait = kWait) {
  return index.Acquire(id, length, [&] { return path; }, absl::Now() + wait, wait,
                       [&] { return "block of " + id; }, doomed);
}

// Acquires `id` as a memory block, loads `payload` into it and releases it.
void LoadAndRelease(BlockIndex& index, const std::string& id, const std::string& payload,
                    std::vector<std::string>* doomed) {
  absl::StatusOr<BlockIndex::Acquired> a = Get(index, id, payload.size(), "", doomed);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->load);
  a->block->memory = payload;
  index.Loaded(*a, absl::OkStatus(), false);
  index.Release(a->block, doomed);
}

TEST(BlockIndexTest, AMissIsLoadedOnceAndThenHit) {
  PendingDeletes deletes;
  BlockIndex index(Options(0, 1000), &deletes);
  std::vector<std::string> doomed;
  LoadAndRelease(index, "a", "hello", &doomed);
  absl::StatusOr<BlockIndex::Acquired> again = Get(index, "a", 5, "", &doomed);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->load);
  EXPECT_EQ(std::string(again->block->payload(), 5), "hello");
  const BlockIndexCounts c = index.Counts();
  EXPECT_EQ(c.misses, 1u);
  EXPECT_EQ(c.hits, 1u);
  EXPECT_EQ(c.pinned_bytes, 5u);
  index.Release(again->block, &doomed);
  EXPECT_EQ(index.Counts().pinned_bytes, 0u);
}

TEST(BlockIndexTest, ConcurrentReadersWaitForTheOneLoad) {
  PendingDeletes deletes;
  BlockIndex index(Options(0, 1000), &deletes);
  std::vector<std::string> doomed;
  absl::StatusOr<BlockIndex::Acquired> loader = Get(index, "a", 3, "", &doomed);
  ASSERT_TRUE(loader.ok() && loader->load);
  std::string seen;
  std::thread waiter([&] {
    std::vector<std::string> d;
    absl::StatusOr<BlockIndex::Acquired> w = Get(index, "a", 3, "", &d);
    ASSERT_TRUE(w.ok()) << w.status();
    EXPECT_FALSE(w->load);
    seen.assign(w->block->payload(), 3);
    index.Release(w->block, &d);
  });
  while (index.Counts().waits == 0) absl::SleepFor(absl::Milliseconds(1));
  loader->block->memory = "abc";
  index.Loaded(*loader, absl::OkStatus(), false);
  index.Release(loader->block, &doomed);
  waiter.join();
  EXPECT_EQ(seen, "abc");
  EXPECT_EQ(index.Counts().misses, 1u);
}

TEST(BlockIndexTest, AWaiterGivesUpAtItsDeadlineNamingTheBlock) {
  PendingDeletes deletes;
  BlockIndex index(Options(0, 1000), &deletes);
  std::vector<std::string> doomed;
  absl::StatusOr<BlockIndex::Acquired> loader = Get(index, "a", 3, "", &doomed);
  ASSERT_TRUE(loader.ok());
  absl::StatusOr<BlockIndex::Acquired> waiter =
      Get(index, "a", 3, "", &doomed, absl::Milliseconds(20));
  ASSERT_TRUE(absl::IsDeadlineExceeded(waiter.status())) << waiter.status();
  EXPECT_TRUE(absl::StrContains(waiter.status().message(), "download of block of a"));
  index.Loaded(*loader, absl::UnavailableError("gone"), false);
}

TEST(BlockIndexTest, AFailedLoadFailsItsWaitersAndTheNextAcquireLoadsAgain) {
  PendingDeletes deletes;
  BlockIndex index(Options(0, 1000), &deletes);
  std::vector<std::string> doomed;
  absl::StatusOr<BlockIndex::Acquired> loader = Get(index, "a", 3, "", &doomed);
  ASSERT_TRUE(loader.ok());
  absl::Status waited;
  std::thread waiter([&] {
    std::vector<std::string> d;
    waited = Get(index, "a", 3, "", &d).status();
  });
  while (index.Counts().waits == 0) absl::SleepFor(absl::Milliseconds(1));
  index.Loaded(*loader, absl::UnavailableError("store down"), false);
  waiter.join();
  EXPECT_EQ(waited, absl::UnavailableError("store down"));
  const BlockIndexCounts c = index.Counts();
  EXPECT_EQ(c.errors, 1u);
  EXPECT_EQ(c.entries, 0u);
  EXPECT_EQ(c.resident_bytes, 0u);
  EXPECT_EQ(c.pinned_bytes, 0u);
  absl::StatusOr<BlockIndex::Acquired> retry = Get(index, "a", 3, "", &doomed);
  ASSERT_TRUE(retry.ok());
  EXPECT_TRUE(retry->load);
  index.Loaded(*retry, absl::UnavailableError("still down"), false);
}

TEST(BlockIndexTest, EvictsTheLeastRecentlyReleasedAndDoomsTheirFiles) {
  PendingDeletes deletes;
  // Disk blocks are charged header + payload; room for two of these.
  const uint64_t charge = EntryHeaderBytes("a") + 100;
  BlockIndex index(Options(2 * charge, 1000), &deletes);
  std::vector<std::string> doomed;
  for (const std::string id : {"a", "b", "a", "c"}) {
    absl::StatusOr<BlockIndex::Acquired> g = Get(index, id, 100, "/cache/" + id, &doomed);
    ASSERT_TRUE(g.ok());
    if (g->load) {
      g->block->memory.assign(100, 'x');  // stands in for the mapping
      index.Loaded(*g, absl::OkStatus(), false);
    }
    index.Release(g->block, &doomed);
  }
  ASSERT_EQ(doomed, std::vector<std::string>{"/cache/b"});  // "a" was used after "b"
  EXPECT_FALSE(deletes.WaitUntilDeleted("/cache/b", absl::Now()));  // marked pending
  deletes.Delete(doomed);
  const BlockIndexCounts c = index.Counts();
  EXPECT_EQ(c.evictions, 1u);
  EXPECT_EQ(c.entries, 2u);
  EXPECT_EQ(c.resident_bytes, 2 * charge);
}

TEST(BlockIndexTest, PinnedBlocksAreNotEvictedUntilReleased) {
  PendingDeletes deletes;
  BlockIndex index(Options(0, 10), &deletes);
  std::vector<std::string> doomed;
  absl::StatusOr<BlockIndex::Acquired> a = Get(index, "a", 8, "", &doomed);
  a->block->memory.assign(8, 'a');
  index.Loaded(*a, absl::OkStatus(), false);
  absl::StatusOr<BlockIndex::Acquired> b = Get(index, "b", 8, "", &doomed);
  b->block->memory.assign(8, 'b');
  index.Loaded(*b, absl::OkStatus(), false);
  EXPECT_EQ(index.Counts().memory_resident_bytes, 16u);  // over the limit while pinned
  EXPECT_EQ(index.Counts().evictions, 0u);
  index.Release(a->block, &doomed);
  EXPECT_EQ(index.Counts().evictions, 1u);  // "a" goes once released
  index.Release(b->block, &doomed);
  EXPECT_EQ(index.Counts().memory_resident_bytes, 8u);
  EXPECT_TRUE(doomed.empty());  // memory blocks have no file
}

TEST(BlockIndexTest, ABlockTheDirectoryRefusedIsChargedToMemory) {
  PendingDeletes deletes;
  BlockIndex index(Options(1 << 20, 1000), &deletes);
  std::vector<std::string> doomed;
  absl::StatusOr<BlockIndex::Acquired> a = Get(index, "a", 50, "/cache/a", &doomed);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(index.Counts().resident_bytes, EntryHeaderBytes("a") + 50);
  a->block->path.clear();  // the loader could not store it
  a->block->memory.assign(50, 'm');
  index.Loaded(*a, absl::OkStatus(), false);
  index.Release(a->block, &doomed);
  const BlockIndexCounts c = index.Counts();
  EXPECT_EQ(c.resident_bytes, 50u);
  EXPECT_EQ(c.memory_resident_bytes, 50u);
}

TEST(BlockIndexTest, AdoptedFilesAreLoadedFromTheirFileAndDuplicatesDoomed) {
  PendingDeletes deletes;
  BlockIndex index(Options(1 << 20, 1000), &deletes);
  std::vector<std::string> doomed;
  LoadAndRelease(index, "cached", "xyz", &doomed);  // in memory (a lock retry)
  std::vector<ScannedEntryFile> files(2);
  files[0].path = "/cache/old";
  files[0].header.identity = "old";
  files[0].header.payload_bytes = 4;
  files[0].header.file_bytes = 40;
  files[1].path = "/cache/dup";
  files[1].header.identity = "cached";
  files[1].header.payload_bytes = 3;
  files[1].header.file_bytes = 39;
  index.Adopt(std::move(files), &doomed);
  EXPECT_EQ(doomed, std::vector<std::string>{"/cache/dup"});
  EXPECT_EQ(index.Counts().adopted, 1u);
  absl::StatusOr<BlockIndex::Acquired> old = Get(index, "old", 4, "", &doomed);
  ASSERT_TRUE(old.ok());
  EXPECT_TRUE(old->load);
  EXPECT_TRUE(old->try_file);
  EXPECT_FALSE(old->block->verified);
  old->block->memory = "file";  // stands in for the checked mapping
  index.Loaded(*old, absl::OkStatus(), /*from_file=*/true);
  EXPECT_TRUE(old->block->verified);
  EXPECT_EQ(index.Counts().hits, 1u);
  index.Release(old->block, &doomed);
  deletes.Delete(doomed);
}

// Loads `id` as a block on disk ("/cache/<id>", `bytes` of payload) and releases it; the
// payload is held in memory in place of the mapping. Returns whether it had to be loaded.
bool LoadDiskBlock(BlockIndex& index, const std::string& id, uint64_t bytes,
                   std::vector<std::string>* doomed) {
  absl::StatusOr<BlockIndex::Acquired> a = Get(index, id, bytes, "/cache/" + id, doomed);
  EXPECT_TRUE(a.ok()) << a.status();
  if (!a.ok()) return false;
  if (a->load) {
    a->block->memory.assign(bytes, 'x');
    index.Loaded(*a, absl::OkStatus(), false);
  }
  index.Release(a->block, doomed);
  return a->load;
}

TEST(BlockIndexTest, TheRecentlyUsedBlockStaysAndTheEvictedOneLoadsAgain) {
  PendingDeletes deletes;
  const uint64_t charge = EntryHeaderBytes("b0") + 100;
  BlockIndex index(Options(2 * charge, 0), &deletes);  // room for two blocks
  std::vector<std::string> doomed;
  EXPECT_TRUE(LoadDiskBlock(index, "b0", 100, &doomed));
  EXPECT_TRUE(LoadDiskBlock(index, "b1", 100, &doomed));
  EXPECT_FALSE(LoadDiskBlock(index, "b0", 100, &doomed));  // a hit: now most recent
  EXPECT_TRUE(LoadDiskBlock(index, "b2", 100, &doomed));   // evicts b1
  EXPECT_EQ(index.Counts().evictions, 1u);
  EXPECT_FALSE(LoadDiskBlock(index, "b0", 100, &doomed));  // still cached
  EXPECT_TRUE(LoadDiskBlock(index, "b1", 100, &doomed));   // was evicted
  const BlockIndexCounts c = index.Counts();
  EXPECT_EQ(c.misses, 4u);
  EXPECT_EQ(c.entries, 2u);
  EXPECT_LE(c.resident_bytes, 2 * charge);
  deletes.Delete(doomed);
}

TEST(BlockIndexTest, TheDiskChargeStaysWithinItsLimitOverManyBlocks) {
  PendingDeletes deletes;
  BlockIndex index(Options(3000, 0), &deletes);
  std::vector<std::string> doomed;
  for (int i = 0; i < 100; ++i) {
    LoadDiskBlock(index, absl::StrCat("blk", i % 37), 512, &doomed);
    ASSERT_LE(index.Counts().resident_bytes, 3000u) << "after block " << i;
  }
  const BlockIndexCounts c = index.Counts();
  EXPECT_GT(c.evictions, 0u);
  EXPECT_EQ(doomed.size(), c.evictions);  // every evicted block's file is to be deleted
  deletes.Delete(doomed);
}

TEST(BlockIndexTest, ABlockBeingLoadedIsNotEvictedAndTheLimitHoldsOnceItIsDone) {
  PendingDeletes deletes;
  const uint64_t charge = EntryHeaderBytes("slow") + 250;
  BlockIndex index(Options(charge + charge / 2, 0), &deletes);  // room for one block
  std::vector<std::string> doomed;
  absl::StatusOr<BlockIndex::Acquired> slow = Get(index, "slow", 250, "/cache/slow", &doomed);
  ASSERT_TRUE(slow.ok() && slow->load);
  for (int i = 0; i < 4; ++i) LoadDiskBlock(index, absl::StrCat("other", i), 250, &doomed);
  EXPECT_EQ(doomed.size(), 4u);  // each other block went, the loading one stayed
  EXPECT_EQ(index.Counts().pinned_bytes, charge);
  slow->block->memory.assign(250, 's');
  index.Loaded(*slow, absl::OkStatus(), false);
  index.Release(slow->block, &doomed);
  absl::StatusOr<BlockIndex::Acquired> again = Get(index, "slow", 250, "/cache/slow", &doomed);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->load);  // still cached
  index.Release(again->block, &doomed);
  const BlockIndexCounts c = index.Counts();
  EXPECT_EQ(c.pinned_bytes, 0u);
  EXPECT_LE(c.resident_bytes, charge + charge / 2);
  deletes.Delete(doomed);
}

TEST(BlockIndexTest, LoadsInFlightMayExceedTheLimitUntilReleased) {
  PendingDeletes deletes;
  BlockIndex index(Options(0, 300), &deletes);  // room for one block of 200
  std::vector<std::string> doomed;
  std::vector<BlockIndex::Acquired> loads;
  for (int i = 0; i < 4; ++i) {
    absl::StatusOr<BlockIndex::Acquired> a = Get(index, absl::StrCat("p", i), 200, "", &doomed);
    ASSERT_TRUE(a.ok()) << a.status();  // over the limit, yet no failure
    ASSERT_TRUE(a->load);
    loads.push_back(*std::move(a));
  }
  EXPECT_EQ(index.Counts().resident_bytes, 800u);
  for (BlockIndex::Acquired& a : loads) {
    a.block->memory.assign(200, 'p');
    index.Loaded(a, absl::OkStatus(), false);
    index.Release(a.block, &doomed);
  }
  const BlockIndexCounts c = index.Counts();
  EXPECT_LE(c.resident_bytes, 300u);
  EXPECT_EQ(c.evictions, 3u);
  EXPECT_EQ(c.errors, 0u);
}

TEST(BlockIndexTest, ConcurrentMissesOfOneBlockShareOneLoad) {
  PendingDeletes deletes;
  BlockIndex index(Options(0, 1 << 20), &deletes);
  constexpr int kThreads = 8;
  std::atomic<int> loaders{0};
  std::vector<std::string> got(kThreads);
  absl::Notification loaded;
  std::vector<std::thread> readers;
  for (int i = 0; i < kThreads; ++i) {
    readers.emplace_back([&, i] {
      std::vector<std::string> d;
      absl::StatusOr<BlockIndex::Acquired> a = Get(index, "one", 4, "", &d);
      if (!a.ok()) return;
      if (a->load) {
        ++loaders;
        loaded.WaitForNotificationWithTimeout(absl::Seconds(60));  // the others queue up
        a->block->memory = "data";
        index.Loaded(*a, absl::OkStatus(), false);
      }
      got[i].assign(a->block->payload(), 4);
      index.Release(a->block, &d);
    });
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (index.Counts().waits < kThreads - 1 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(index.Counts().waits, static_cast<uint64_t>(kThreads - 1));
  loaded.Notify();
  for (std::thread& t : readers) t.join();
  EXPECT_EQ(loaders.load(), 1);
  EXPECT_EQ(index.Counts().misses, 1u);
  for (const std::string& g : got) EXPECT_EQ(g, "data");
}

TEST(BlockIndexTest, BlocksBeyondTheMappingBudgetAreUnmappedAndLoadedFromTheirFile) {
  const std::string dir = testing::MakeTempDir("block_index_mapped");
  PendingDeletes deletes;
  BlockIndexOptions options = Options(1 << 20, 0);
  options.max_mapped_entries = 1;
  BlockIndex index(options, &deletes);
  std::vector<std::string> doomed;
  // Maps the block's entry file (writing it first when `write`), as the cache's loader does.
  const auto map = [&](const BlockIndex::Acquired& a, bool write) {
    if (write) {
      ASSERT_TRUE(WriteEntryFile(a.block->path, a.block->identity, "abcd").ok());
    }
    absl::StatusOr<EntryFileMap> m = MapEntryFile(a.block->path, a.block->identity, 4, {});
    ASSERT_TRUE(m.ok()) << m.status();
    a.block->map = *std::move(m);
  };
  for (int pass = 0; pass < 3; ++pass) {
    for (int i = 0; i < 4; ++i) {
      const std::string id = absl::StrCat("m", i);
      absl::StatusOr<BlockIndex::Acquired> a =
          Get(index, id, 4, absl::StrCat(dir, "/", EntryFileName(id)), &doomed);
      ASSERT_TRUE(a.ok()) << a.status();
      ASSERT_TRUE(a->load) << "pass " << pass << ": unmapped blocks are handed out to load";
      EXPECT_EQ(a->try_file, pass > 0);  // from the file, not downloaded again
      map(*a, /*write=*/pass == 0);
      index.Loaded(*a, absl::OkStatus(), /*from_file=*/pass > 0);
      EXPECT_EQ(std::string(a->block->payload(), 4), "abcd");
      index.Release(a->block, &doomed);
    }
  }
  const BlockIndexCounts c = index.Counts();
  EXPECT_EQ(c.misses, 4u);
  EXPECT_EQ(c.hits, 8u);
  EXPECT_EQ(c.entries, 4u);
  EXPECT_EQ(c.evictions, 0u);
}

}  // namespace
}  // namespace zephon::storage
