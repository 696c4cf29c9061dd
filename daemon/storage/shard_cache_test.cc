#include "daemon/storage/shard_cache.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/temp_dir_testing.h"
#include "daemon/storage/fake_object_store_testing.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7 + i / 97) & 0xff);
  return s;
}

std::string TempDir(const std::string& name) {
  return testing::MakeTempDir("shard_cache_" + name);
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (const dirent* e = readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  closedir(d);
  return out;
}

uint64_t BlockFileBytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& n : Files(dir)) {
    if (!absl::EndsWith(n, ".blk")) continue;
    struct stat st;
    if (stat((dir + "/" + n).c_str(), &st) == 0) total += st.st_size;
  }
  return total;
}

RemoteObject Obj(FakeObjectStore& store, const std::string& key) {
  RemoteObject o;
  o.store_id = "fake://store";
  o.url = "fake://store/" + key;
  o.info = store.Head(key).value();
  return o;
}

std::shared_ptr<ShardCache> MakeCache(const std::string& dir, uint64_t max_bytes,
                                      uint64_t block_bytes) {
  ShardCacheOptions o;
  o.dir = dir;
  o.max_bytes = max_bytes;
  o.block_bytes = block_bytes;
  return ShardCache::Create(o).value();
}

std::string ReadAll(ShardCache& cache, FakeObjectStore& store, const RemoteObject& o,
                    uint64_t offset, uint64_t n) {
  std::string out(n, '\0');
  const absl::Status s = cache.Read(store, o, offset, n, out.data());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(ShardCacheTest, ReadsAcrossBlocksReturnTheObjectsBytes) {
  FakeObjectStore store;
  const std::string data = Pattern(10000, 1);
  store.Set("d/a.bin", data, "v1");
  auto cache = MakeCache(TempDir("across"), 1 << 20, 256);
  const RemoteObject o = Obj(store, "d/a.bin");
  for (auto [off, n] : std::vector<std::pair<uint64_t, uint64_t>>{
           {0, 10000}, {0, 1}, {255, 2}, {1000, 3000}, {9999, 1}, {10000, 0}, {3, 700}}) {
    EXPECT_EQ(ReadAll(*cache, store, o, off, n), data.substr(off, n)) << off << "+" << n;
  }
  EXPECT_EQ(store.ranges(), 40);  // ceil(10000 / 256) blocks, each fetched once
  EXPECT_EQ(store.gets(), 0);
  const ShardCacheStats s = cache->Stats();
  EXPECT_TRUE(s.on_disk);
  EXPECT_EQ(s.misses, 40u);
  EXPECT_EQ(s.bytes_downloaded, 10000u);
  EXPECT_GT(s.hits, 0u);
  EXPECT_EQ(s.pinned_bytes, 0u);
}

TEST(ShardCacheTest, SmallObjectsAreOneWholeObjectGet) {
  FakeObjectStore store;
  store.Set("small.idx", Pattern(300, 2), "v1");
  auto cache = MakeCache(TempDir("whole"), 1 << 20, 4096);
  const RemoteObject o = Obj(store, "small.idx");
  EXPECT_EQ(ReadAll(*cache, store, o, 10, 20), Pattern(300, 2).substr(10, 20));
  EXPECT_EQ(ReadAll(*cache, store, o, 0, 300), Pattern(300, 2));
  EXPECT_EQ(store.gets(), 1);
  EXPECT_EQ(store.ranges(), 0);
}

TEST(ShardCacheTest, OutOfRangeReadNamesTheObject) {
  FakeObjectStore store;
  store.Set("x.bin", Pattern(100, 3), "v1");
  auto cache = MakeCache(TempDir("range"), 1 << 20, 64);
  std::string out(10, '\0');
  const absl::Status s = cache->Read(store, Obj(store, "x.bin"), 95, 10, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(absl::StrContains(s.message(), "fake://store/x.bin")) << s;
}

TEST(ShardCacheTest, AFailedDownloadFailsItsWaitersAndTheNextReadRetries) {
  FakeObjectStore store;
  store.Set("f.bin", Pattern(4000, 9), "v1");
  auto cache = MakeCache(TempDir("fail"), 1 << 20, 1000);
  const RemoteObject o = Obj(store, "f.bin");
  store.FailWith(absl::UnavailableError("S3 GET s3://bkt/f.bin: HTTP 503 SlowDown"));
  store.Close();
  std::vector<std::thread> readers;
  std::vector<absl::Status> results(4);
  for (int i = 0; i < 4; ++i) {
    readers.emplace_back([&, i] {
      std::string out(10, '\0');
      results[i] = cache->Read(store, o, 2000, 10, out.data());
    });
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (cache->Stats().waits < 3 && absl::Now() < deadline) absl::SleepFor(absl::Milliseconds(1));
  store.Open();
  for (auto& t : readers) t.join();
  EXPECT_EQ(store.ranges(), 1);
  for (const auto& r : results) {
    EXPECT_EQ(r.code(), absl::StatusCode::kUnavailable);
    EXPECT_TRUE(absl::StrContains(r.message(), "block 2 of fake://store/f.bin: S3 GET")) << r;
    EXPECT_TRUE(absl::StrContains(r.message(), "HTTP 503")) << r;
  }
  EXPECT_EQ(cache->Stats().entries, 0u);
  store.FailWith(absl::OkStatus());
  EXPECT_EQ(ReadAll(*cache, store, o, 2000, 10), Pattern(4000, 9).substr(2000, 10));
  EXPECT_EQ(store.ranges(), 2);
}

TEST(ShardCacheTest, WarmRestartAdoptsEntriesAndDeletesStrayTempFiles) {
  FakeObjectStore store;
  const std::string data = Pattern(3000, 10);
  store.Set("w.bin", data, "v1");
  const std::string dir = TempDir("warm");
  {
    auto cache = MakeCache(dir, 1 << 20, 1000);
    EXPECT_EQ(ReadAll(*cache, store, Obj(store, "w.bin"), 0, 3000), data);
  }
  std::ofstream(dir + "/.tmp.deadbeef.blk.123.0") << "partial";
  EXPECT_EQ(store.ranges(), 3);
  auto cache = MakeCache(dir, 1 << 20, 1000);
  EXPECT_EQ(ReadAll(*cache, store, Obj(store, "w.bin"), 0, 3000), data);
  EXPECT_EQ(store.ranges(), 3);  // nothing downloaded again
  const ShardCacheStats s = cache->Stats();
  EXPECT_EQ(s.adopted, 3u);
  EXPECT_EQ(s.rejected, 1u);
  EXPECT_EQ(s.hits, 3u);  // each adopted file mapped on first use
  EXPECT_EQ(s.misses, 0u);
  for (const auto& n : Files(dir)) EXPECT_FALSE(absl::StartsWith(n, ".tmp.")) << n;
}

TEST(ShardCacheTest, CorruptOrShortEntryFilesAreRejectedAndFetchedAgain) {
  FakeObjectStore store;
  const std::string data = Pattern(2000, 11);
  store.Set("c.bin", data, "v1");
  const std::string dir = TempDir("corrupt");
  {
    auto cache = MakeCache(dir, 1 << 20, 1000);
    ReadAll(*cache, store, Obj(store, "c.bin"), 0, 2000);
  }
  std::vector<std::string> blocks;
  for (const auto& n : Files(dir)) {
    if (absl::EndsWith(n, ".blk")) blocks.push_back(dir + "/" + n);
  }
  ASSERT_EQ(blocks.size(), 2u);
  {  // flip the last payload byte of one entry
    const int fd = open(blocks[0].c_str(), O_RDWR);
    struct stat st;
    ASSERT_EQ(fstat(fd, &st), 0);
    char c;
    ASSERT_EQ(pread(fd, &c, 1, st.st_size - 1), 1);
    c ^= 0x5a;
    ASSERT_EQ(pwrite(fd, &c, 1, st.st_size - 1), 1);
    close(fd);
  }
  ASSERT_EQ(truncate(blocks[1].c_str(), 100), 0);  // cut the other one short
  auto cache = MakeCache(dir, 1 << 20, 1000);
  EXPECT_EQ(ReadAll(*cache, store, Obj(store, "c.bin"), 0, 2000), data);
  EXPECT_EQ(store.ranges(), 4);  // both blocks downloaded again
  EXPECT_EQ(cache->Stats().rejected, 2u);
  EXPECT_EQ(cache->Stats().hits, 0u);  // a file that fails to map is no hit...
  EXPECT_EQ(cache->Stats().misses, 2u);  // ...but a download
  // The replacements are good: a third cache adopts both without downloading.
  cache.reset();
  auto third = MakeCache(dir, 1 << 20, 1000);
  EXPECT_EQ(ReadAll(*third, store, Obj(store, "c.bin"), 0, 2000), data);
  EXPECT_EQ(store.ranges(), 4);
}

TEST(ShardCacheTest, AChangedVersionNeverHitsTheOldEntries) {
  FakeObjectStore store;
  store.Set("v.bin", Pattern(1500, 12), "etag-1");
  auto cache = MakeCache(TempDir("version"), 1 << 20, 1000);
  EXPECT_EQ(ReadAll(*cache, store, Obj(store, "v.bin"), 0, 1500), Pattern(1500, 12));
  store.Set("v.bin", Pattern(1500, 13), "etag-2");  // same size, new bytes
  EXPECT_EQ(ReadAll(*cache, store, Obj(store, "v.bin"), 0, 1500), Pattern(1500, 13));
  EXPECT_EQ(store.ranges(), 4);
}

TEST(ShardCacheTest, AnObjectReplacedAfterOpenFailsInsteadOfMixingBytes) {
  FakeObjectStore store;
  store.Set("m.bin", Pattern(3000, 14), "etag-1");
  auto cache = MakeCache(TempDir("mixed"), 1 << 20, 1000);
  const RemoteObject opened = Obj(store, "m.bin");
  ReadAll(*cache, store, opened, 0, 10);  // block 0 cached from the old object
  store.Set("m.bin", Pattern(3000, 15), "etag-2");
  std::string out(10, '\0');
  absl::Status s = cache->Read(store, opened, 2500, 10, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "changed since the dataset was opened")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "fake://store/m.bin")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "version 'etag-1', 3000 bytes then")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "version 'etag-2' now")) << s;
  // Shorter now: the conditional read fails on the version before any length check.
  store.Set("m.bin", Pattern(2200, 15), "etag-3");
  s = cache->Read(store, opened, 2500, 10, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "changed since the dataset was opened")) << s;
  EXPECT_EQ(store.heads(), 1);  // Obj() only: the checks rode on the GETs
  EXPECT_EQ(cache->Stats().entries, 1u);  // nothing of the new object was cached
}

TEST(ShardCacheTest, ABlockIsOneConditionalGetWithoutAHead) {
  FakeObjectStore store;
  store.Set("big.bin", Pattern(2500, 20), "etag-big");
  store.Set("small.bin", Pattern(100, 21), "etag-small");
  auto cache = MakeCache(TempDir("conditional"), 1 << 20, 1000);
  const RemoteObject big = Obj(store, "big.bin");
  const RemoteObject small = Obj(store, "small.bin");
  const int heads_at_open = store.heads();
  EXPECT_EQ(ReadAll(*cache, store, big, 0, 2500), Pattern(2500, 20));
  EXPECT_EQ(ReadAll(*cache, store, small, 0, 100), Pattern(100, 21));
  EXPECT_EQ(store.ranges(), 3);       // one GET per block...
  EXPECT_EQ(store.gets(), 1);         // ...and one for the whole small object
  EXPECT_EQ(store.conditional(), 4);  // each carrying the version seen at open
  EXPECT_EQ(store.heads() - heads_at_open, 0);
}

TEST(ShardCacheTest, WithoutVerifyVersionReadsAreUnconditional) {
  FakeObjectStore store;
  store.Set("u.bin", Pattern(2000, 22), "etag-1");
  ShardCacheOptions options;
  options.dir = TempDir("unverified");
  options.block_bytes = 1000;
  options.verify_version = false;
  auto cache = ShardCache::Create(options).value();
  const RemoteObject opened = Obj(store, "u.bin");
  ReadAll(*cache, store, opened, 0, 10);
  store.Set("u.bin", Pattern(2000, 23), "etag-2");  // same size: only a version check sees it
  EXPECT_EQ(ReadAll(*cache, store, opened, 1500, 10), Pattern(2000, 23).substr(1500, 10));
  EXPECT_EQ(store.conditional(), 0);
  EXPECT_EQ(store.heads(), 1);  // Obj() only
}

TEST(ShardCacheTest, AStoreWithoutVersionsStillCatchesAChangedLength) {
  FakeObjectStore store;
  store.Set("n.bin", Pattern(3000, 24), "");  // no version: nothing to make reads conditional
  auto cache = MakeCache(TempDir("noversion"), 1 << 20, 1000);
  const RemoteObject opened = Obj(store, "n.bin");
  ReadAll(*cache, store, opened, 0, 10);
  store.Set("n.bin", Pattern(2200, 25), "");  // shorter now: block 2 comes back short
  std::string out(10, '\0');
  const absl::Status s = cache->Read(store, opened, 2500, 10, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "returned 200 bytes, expected 1000")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "changed since the dataset was opened")) << s;
  EXPECT_EQ(store.conditional(), 0);
}

TEST(ShardCacheTest, ABlockPastTheEndOfAShrunkObjectIsDataLoss) {
  FakeObjectStore store;
  store.Set("n.bin", Pattern(3000, 24), "");  // no version
  auto cache = MakeCache(TempDir("shrunk"), 1 << 20, 1000);
  const RemoteObject opened = Obj(store, "n.bin");
  store.Set("n.bin", Pattern(1500, 25), "");  // block 2 starts past the new end
  std::string out(10, '\0');
  const absl::Status s = cache->Read(store, opened, 2500, 10, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;  // the store said OUT_OF_RANGE
  EXPECT_TRUE(absl::StrContains(s.message(), "block 2 (bytes [2000, 3000)) of "
                                             "fake://store/n.bin")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "changed since the dataset was opened")) << s;
  EXPECT_EQ(cache->Stats().entries, 0u);
}

TEST(ShardCacheTest, WithoutADiskCacheBlocksStayInMemoryAndAreFetchedOnce) {
  FakeObjectStore store;
  const std::string data = Pattern(5000, 16);
  store.Set("mem.bin", data, "v1");
  const std::string dir = TempDir("memory");
  ShardCacheOptions options;
  options.dir = dir;
  options.max_bytes = 0;
  options.block_bytes = 1000;
  options.memory_bytes = 2000;
  auto cache = ShardCache::Create(options).value();
  const RemoteObject o = Obj(store, "mem.bin");
  for (uint64_t off = 0; off < 5000; off += 50) {
    ASSERT_EQ(ReadAll(*cache, store, o, off, 50), data.substr(off, 50));
  }
  EXPECT_EQ(store.ranges(), 5);
  EXPECT_TRUE(Files(dir).empty());
  const ShardCacheStats s = cache->Stats();
  EXPECT_FALSE(s.on_disk);
  EXPECT_LE(s.resident_bytes, 2000u);
}

TEST(ShardCacheTest, ASecondCacheOnTheSameDirectoryRunsInMemory) {
  FakeObjectStore store;
  store.Set("s.bin", Pattern(100, 17), "v1");
  const std::string dir = TempDir("shared");
  auto first = MakeCache(dir, 1 << 20, 1000);
  auto second = MakeCache(dir, 1 << 20, 1000);
  ReadAll(*first, store, Obj(store, "s.bin"), 0, 100);
  EXPECT_EQ(ReadAll(*second, store, Obj(store, "s.bin"), 0, 100), Pattern(100, 17));
  EXPECT_TRUE(first->Stats().on_disk);
  EXPECT_FALSE(second->Stats().on_disk);
}

TEST(ShardCacheTest, ADaemonThatFindsTheDirectoryLockedTakesItOverOnceReleased) {
  FakeObjectStore store;
  store.Set("a.bin", Pattern(100, 30), "v1");
  store.Set("b.bin", Pattern(100, 31), "v1");
  const std::string dir = TempDir("takeover");
  auto first = MakeCache(dir, 1 << 20, 1000);
  ReadAll(*first, store, Obj(store, "a.bin"), 0, 100);
  ReadAll(*first, store, Obj(store, "b.bin"), 0, 100);
  ShardCacheOptions options;
  options.dir = dir;
  options.block_bytes = 1000;
  options.memory_bytes = 5000;
  options.lock_retry_interval = absl::Milliseconds(50);
  auto second = ShardCache::Create(options).value();
  EXPECT_EQ(ReadAll(*second, store, Obj(store, "b.bin"), 0, 100), Pattern(100, 31));
  ShardCacheStats s = second->Stats();
  EXPECT_FALSE(s.on_disk);
  EXPECT_EQ(s.dir, "");
  EXPECT_EQ(s.limit_bytes, 5000u);
  EXPECT_EQ(s.memory_resident_bytes, 100u);
  first.reset();  // releases the lock
  absl::SleepFor(absl::Milliseconds(100));
  const int gets = store.gets();
  EXPECT_EQ(ReadAll(*second, store, Obj(store, "a.bin"), 0, 100), Pattern(100, 30));
  EXPECT_EQ(ReadAll(*second, store, Obj(store, "b.bin"), 0, 100), Pattern(100, 31));
  EXPECT_EQ(store.gets(), gets);  // a.bin from the adopted file, b.bin from memory
  s = second->Stats();
  EXPECT_TRUE(s.on_disk);
  EXPECT_EQ(s.dir, dir);
  EXPECT_EQ(s.adopted, 1u);  // b.bin's file was dropped: b.bin is cached in memory
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(BlockFileBytes(dir), s.resident_bytes - s.memory_resident_bytes);
  // New blocks go to the directory now.
  store.Set("c.bin", Pattern(100, 32), "v1");
  ReadAll(*second, store, Obj(store, "c.bin"), 0, 100);
  EXPECT_EQ(second->Stats().memory_resident_bytes, 100u);
}

TEST(ShardCacheTest, TheLockIsNotRetriedBeforeTheInterval) {
  FakeObjectStore store;
  store.Set("a.bin", Pattern(100, 33), "v1");
  const std::string dir = TempDir("patient");
  auto first = MakeCache(dir, 1 << 20, 1000);
  ReadAll(*first, store, Obj(store, "a.bin"), 0, 100);
  auto second = MakeCache(dir, 1 << 20, 1000);  // lock_retry_interval: 30 s
  ReadAll(*second, store, Obj(store, "a.bin"), 0, 100);
  first.reset();
  ReadAll(*second, store, Obj(store, "a.bin"), 0, 100);
  EXPECT_FALSE(second->Stats().on_disk);
}

TEST(ShardCacheTest, BlocksTheDirectoryRefusesAreHeldInMemoryWithinMemoryBytes) {
  FakeObjectStore store;
  const std::string data = Pattern(20000, 34);
  store.Set("full.bin", data, "v1");
  const std::string dir = TempDir("refused");
  ShardCacheOptions options;
  options.dir = dir;
  options.max_bytes = 1 << 20;  // the disk budget would hold every block
  options.block_bytes = 1000;
  options.memory_bytes = 2000;
  auto cache = ShardCache::Create(options).value();
  const RemoteObject o = Obj(store, "full.bin");
  ReadAll(*cache, store, o, 0, 10);  // opens the directory
  const uint64_t on_disk = cache->Stats().resident_bytes;
  std::filesystem::remove_all(dir);  // every later write fails
  for (uint64_t off = 1000; off < data.size(); off += 1000) {
    ASSERT_EQ(ReadAll(*cache, store, o, off, 1000), data.substr(off, 1000));
  }
  ShardCacheStats s = cache->Stats();
  EXPECT_TRUE(s.on_disk);
  EXPECT_LE(s.memory_resident_bytes, 2000u);
  EXPECT_EQ(s.resident_bytes, on_disk + s.memory_resident_bytes);
  EXPECT_GE(s.evictions, 17u);
  EXPECT_EQ(s.pinned_bytes, 0u);
  // The most recent block is still served from memory.
  const int ranges = store.ranges();
  EXPECT_EQ(ReadAll(*cache, store, o, 19500, 500), data.substr(19500, 500));
  EXPECT_EQ(store.ranges(), ranges);
}

TEST(ShardCacheTest, StatsReportTheConfiguredDirectoryUntilItIsOpened) {
  ShardCacheOptions options;
  options.dir = TempDir("configured");
  options.max_bytes = uint64_t{200} << 30;
  auto cache = ShardCache::Create(options).value();
  ShardCacheStats s = cache->Stats();
  EXPECT_FALSE(s.on_disk);
  EXPECT_EQ(s.dir, options.dir);
  EXPECT_EQ(s.limit_bytes, uint64_t{200} << 30);
  // A directory that cannot be made: memory only, with the memory limit.
  FakeObjectStore store;
  store.Set("x", Pattern(10, 35), "v1");
  std::ofstream(options.dir + "/file") << "x";
  options.dir += "/file/objects";
  cache = ShardCache::Create(options).value();
  ReadAll(*cache, store, Obj(store, "x"), 0, 10);
  s = cache->Stats();
  EXPECT_FALSE(s.on_disk);
  EXPECT_EQ(s.dir, "");
  EXPECT_EQ(s.limit_bytes, options.memory_bytes);
}

TEST(ShardCacheTest, TheDirectoryScanRunsOutsideTheLock) {
  FakeObjectStore store;
  store.Set("s.bin", Pattern(3000, 36), "v1");
  const std::string dir = TempDir("scan");
  {
    auto warm = MakeCache(dir, 1 << 20, 1000);
    ReadAll(*warm, store, Obj(store, "s.bin"), 0, 3000);
  }
  absl::Notification scanning, release;
  ShardCacheOptions options;
  options.dir = dir;
  options.block_bytes = 1000;
  options.wait_timeout = absl::Milliseconds(200);
  options.TEST_before_scan = [&] {
    scanning.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(60));
  };
  auto cache = ShardCache::Create(options).value();
  const RemoteObject o = Obj(store, "s.bin");
  std::string first(3000, '\0');
  absl::Status first_status;
  std::thread scanner([&] { first_status = cache->Read(store, o, 0, 3000, first.data()); });
  ASSERT_TRUE(scanning.WaitForNotificationWithTimeout(absl::Seconds(30)));
  // Stats answer meanwhile (a /metrics scrape does not wait for the scan)...
  absl::Notification stats_done;
  ShardCacheStats s;
  std::thread stats([&] {
    s = cache->Stats();
    stats_done.Notify();
  });
  EXPECT_TRUE(stats_done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_FALSE(s.on_disk);
  EXPECT_EQ(s.dir, dir);
  // ...and another Read waits for the scan, at most wait_timeout.
  std::string out(10, '\0');
  const absl::Status waited = cache->Read(store, o, 0, 10, out.data());
  EXPECT_EQ(waited.code(), absl::StatusCode::kDeadlineExceeded) << waited;
  EXPECT_TRUE(absl::StrContains(waited.message(), "scan of " + dir)) << waited;
  release.Notify();
  scanner.join();
  stats.join();
  ASSERT_TRUE(first_status.ok()) << first_status;
  EXPECT_EQ(first, Pattern(3000, 36));
  EXPECT_EQ(store.ranges(), 3);  // the warm cache's downloads only
  EXPECT_EQ(cache->Stats().adopted, 3u);
}

TEST(ShardCacheTest, ConcurrentEvictionsKeepFilesAndChargesInStep) {
  FakeObjectStore store;
  const std::string data = Pattern(3000, 38);  // 30 blocks of 100
  store.Set("churn.bin", data, "v1");
  const std::string dir = TempDir("churn");
  auto cache = MakeCache(dir, 600, 100);  // about four entries
  const RemoteObject o = Obj(store, "churn.bin");
  std::vector<std::thread> readers;
  std::atomic<int> bad{0};
  for (int t = 0; t < 8; ++t) {
    readers.emplace_back([&, t] {
      std::mt19937 rng(t);
      for (int i = 0; i < 300; ++i) {
        const uint64_t off = (rng() % 6) * 100 + rng() % 50;  // few blocks: many re-reads
        std::string out(40, '\0');
        if (!cache->Read(store, o, off, 40, out.data()).ok() || out != data.substr(off, 40)) {
          ++bad;
        }
      }
    });
  }
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad.load(), 0);
  const ShardCacheStats s = cache->Stats();
  EXPECT_GT(s.evictions, 0u);
  EXPECT_EQ(s.pinned_bytes, 0u);
  EXPECT_LE(s.resident_bytes, 600u);
  EXPECT_EQ(BlockFileBytes(dir), s.resident_bytes);  // no cached entry lost its file
}

TEST(ShardCacheTest, CreateRejectsBadOptions) {
  ShardCacheOptions o;
  o.block_bytes = 0;
  EXPECT_EQ(ShardCache::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.block_bytes = uint64_t{2} << 30;
  EXPECT_TRUE(absl::StrContains(ShardCache::Create(o).status().message(), "block_bytes"));
}

}  // namespace
}  // namespace zephon::storage
