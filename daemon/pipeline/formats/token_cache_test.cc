#include "daemon/pipeline/formats/token_cache.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace zephon::pipeline {
namespace {

namespace fs = std::filesystem;

std::string TempDir() {
  std::string pattern = absl::StrCat(::testing::TempDir(), "/token_cache_XXXXXX");
  EXPECT_NE(mkdtemp(pattern.data()), nullptr);
  return pattern;
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Commits an entry the way JsonlShard does: .tok, then .off renamed into place.
void WriteEntry(const std::string& dir, const std::string& key, size_t tok_bytes,
                char fill = 't') {
  const std::string prefix = absl::StrCat(dir, "/", key);
  const std::string tag = absl::StrCat(".tmp.", getpid(), ".", std::hash<std::thread::id>()(
                                                                   std::this_thread::get_id()));
  WriteFile(prefix + ".tok" + tag, std::string(tok_bytes, fill));
  WriteFile(prefix + ".off" + tag, std::string(16, 'o'));
  ASSERT_EQ(rename((prefix + ".tok" + tag).c_str(), (prefix + ".tok").c_str()), 0);
  ASSERT_EQ(rename((prefix + ".off" + tag).c_str(), (prefix + ".off").c_str()), 0);
}

bool Exists(const std::string& path) { return fs::exists(path); }

void SetMtimeAgo(const std::string& path, absl::Duration ago) {
  const int64_t ns = absl::ToUnixNanos(absl::Now() - ago);
  struct timespec times[2] = {{0, UTIME_OMIT}, {ns / 1000000000, ns % 1000000000}};
  ASSERT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0) << path;
}

// Builds `key` (tok_bytes + 16 bytes) under a pin and releases it.
void Build(TokenCache& cache, const std::string& key, size_t tok_bytes) {
  TokenCache::Pin pin = cache.Acquire(key);
  WriteEntry(cache.dir(), key, tok_bytes);
  pin.Built();
}

TEST(TokenCacheTest, AMissingDirectoryIsAnEmptyCache) {
  auto cache = TokenCache::Create(TempDir() + "/not/there", 100);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ((*cache)->Stats().entries, 0u);
  EXPECT_EQ((*cache)->Stats().budget_bytes, 100u);
  EXPECT_FALSE(TokenCache::Create("", 1).ok());
}

TEST(TokenCacheTest, ScanAdoptsCommittedEntriesAndRemovesStaleFiles) {
  const std::string dir = TempDir();
  WriteEntry(dir, "aaaa", 40);
  WriteFile(dir + "/aaaa.stats", "sss");
  WriteEntry(dir, "bbbb", 8);
  // A dead process's temporary file, old: removed; fresh: kept (a build elsewhere).
  const std::string dead_old = dir + "/cccc.tok.tmp.2147483646.00000000000000ab";
  const std::string dead_fresh = dir + "/cccc.off.tmp.2147483646.00000000000000cd";
  const std::string ours_old = absl::StrCat(dir, "/dddd.tok.tmp.", getpid(), ".0000000000000001");
  for (const auto& p : {dead_old, dead_fresh, ours_old}) WriteFile(p, "xx");
  SetMtimeAgo(dead_old, absl::Hours(1));
  SetMtimeAgo(ours_old, absl::Hours(1));
  // A .tok without its .off: old is garbage, fresh may be a build committing; an .off
  // without its .tok never becomes usable.
  WriteFile(dir + "/eeee.tok", "1234");
  SetMtimeAgo(dir + "/eeee.tok", absl::Hours(1));
  WriteFile(dir + "/ffff.tok", "1234");
  WriteFile(dir + "/abcd.off", "12345678");
  WriteFile(dir + "/unrelated.txt", "keep me");
  WriteFile(dir + "/notes.stats", "not a cache key");
  SetMtimeAgo(dir + "/notes.stats", absl::Hours(1));
  fs::create_directory(dir + "/objects");

  auto cache = TokenCache::Create(dir, 0);
  ASSERT_TRUE(cache.ok()) << cache.status();
  const TokenCacheStats s = (*cache)->Stats();
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.adopted, 2u);
  EXPECT_EQ(s.bytes, (16u + 40 + 3) + (16u + 8));
  EXPECT_EQ(s.stale_removed, 3u);
  EXPECT_FALSE(Exists(dead_old));
  EXPECT_TRUE(Exists(dead_fresh));
  EXPECT_TRUE(Exists(ours_old));
  EXPECT_FALSE(Exists(dir + "/eeee.tok"));
  EXPECT_TRUE(Exists(dir + "/ffff.tok"));
  EXPECT_FALSE(Exists(dir + "/abcd.off"));
  EXPECT_TRUE(Exists(dir + "/unrelated.txt"));
  EXPECT_TRUE(Exists(dir + "/notes.stats"));
  EXPECT_TRUE(Exists(dir + "/objects"));
}

TEST(TokenCacheTest, HitsAndBuildsAreCountedAndAForeignEntryIsAdoptedOnHit) {
  const std::string dir = TempDir();
  auto cache = *TokenCache::Create(dir, 0);
  Build(*cache, "k1", 84);
  WriteEntry(dir, "k2", 4);  // committed by another process after the scan
  {
    TokenCache::Pin pin = cache->Acquire("k2");
    pin.Hit();
    EXPECT_EQ(cache->Stats().pinned_bytes, 20u);
  }
  TokenCache::Pin().Hit();  // an unmanaged pin ignores reports
  const TokenCacheStats s = cache->Stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.hits, 1u);
  EXPECT_EQ(s.bytes_built, 100u);
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.bytes, 120u);
  EXPECT_EQ(s.pinned_bytes, 0u);
  // A pin whose build failed leaves nothing behind.
  { TokenCache::Pin failed = cache->Acquire("k3"); }
  EXPECT_EQ(cache->Stats().entries, 2u);
}

TEST(TokenCacheTest, EvictsLeastRecentlyUsedFirstAndTheOrderSurvivesARestart) {
  const std::string dir = TempDir();
  {
    auto cache = *TokenCache::Create(dir, 0);
    for (const char* key : {"a", "b", "c", "d"}) Build(*cache, key, 84);  // 100 bytes each
    cache->Acquire("a").Hit();  // a is now the most recent: b, c, d, a
  }
  // A restart with room for three: the least recent (b) goes, from .off first.
  auto cache = *TokenCache::Create(dir, 300);
  (void)cache->Stats();  // waits for the start-up scan, which runs on its own thread
  EXPECT_FALSE(Exists(dir + "/b.off"));
  EXPECT_FALSE(Exists(dir + "/b.tok"));
  for (const char* key : {"a", "c", "d"}) EXPECT_TRUE(Exists(dir + "/" + key + ".off")) << key;
  EXPECT_EQ(cache->Stats().evictions, 1u);
  EXPECT_EQ(cache->Stats().evicted_bytes, 100u);
  // c is used; a new entry evicts d, then a.
  cache->Acquire("c").Hit();
  Build(*cache, "e", 84);
  EXPECT_FALSE(Exists(dir + "/d.off"));
  EXPECT_TRUE(Exists(dir + "/a.off"));
  Build(*cache, "f", 84);
  EXPECT_FALSE(Exists(dir + "/a.off"));
  EXPECT_TRUE(Exists(dir + "/c.off"));
  const TokenCacheStats s = cache->Stats();
  EXPECT_EQ(s.entries, 3u);
  EXPECT_EQ(s.bytes, 300u);
  EXPECT_EQ(s.evictions, 3u);
  EXPECT_FALSE(s.over_budget);
}

TEST(TokenCacheTest, PinnedEntriesAreNeverEvictedAndOverBudgetIsReported) {
  const std::string dir = TempDir();
  auto cache = *TokenCache::Create(dir, 150);
  TokenCache::Pin a = cache->Acquire("a");
  WriteEntry(dir, "a", 84);
  a.Built();
  TokenCache::Pin b = cache->Acquire("b");
  WriteEntry(dir, "b", 84);
  b.Built();
  TokenCacheStats s = cache->Stats();
  EXPECT_TRUE(s.over_budget);
  EXPECT_EQ(s.bytes, 200u);
  EXPECT_EQ(s.pinned_bytes, 200u);
  EXPECT_EQ(s.evictions, 0u);
  EXPECT_TRUE(Exists(dir + "/a.off") && Exists(dir + "/b.off"));
  // Releasing one while over budget evicts it.
  a = TokenCache::Pin();
  s = cache->Stats();
  EXPECT_FALSE(s.over_budget);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_FALSE(Exists(dir + "/a.off"));
  EXPECT_TRUE(Exists(dir + "/b.off"));
  // Two pins of one entry: it stays pinned until both are gone.
  TokenCache::Pin b2 = cache->Acquire("b");
  b = TokenCache::Pin();
  Build(*cache, "c", 84);  // over budget, b still pinned: c goes once its builder lets go
  EXPECT_TRUE(Exists(dir + "/b.off"));
  EXPECT_FALSE(Exists(dir + "/c.off"));
}

TEST(TokenCacheTest, ZeroBudgetIsUnlimited) {
  auto cache = *TokenCache::Create(TempDir(), 0);
  for (int i = 0; i < 5; ++i) Build(*cache, absl::StrCat("k", i), 1000);
  EXPECT_EQ(cache->Stats().entries, 5u);
  EXPECT_EQ(cache->Stats().evictions, 0u);
}

TEST(TokenCacheTest, ConcurrentAcquireBuildAndEvictKeepPinnedEntriesWhole) {
  const std::string dir = TempDir();
  auto cache = *TokenCache::Create(dir, 450);  // four of the eight 116-byte entries
  std::atomic<int> torn{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string key = absl::StrCat("k", (i * 7 + t * 3) % 8);
        const std::string prefix = dir + "/" + key;
        TokenCache::Pin pin = cache->Acquire(key);
        if (Exists(prefix + ".off")) {
          pin.Hit();
        } else {
          WriteEntry(dir, key, 100);
          pin.Built();
        }
        // While pinned, nobody deletes the pair.
        if (!Exists(prefix + ".off") || !Exists(prefix + ".tok")) ++torn;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(torn.load(), 0);
  const TokenCacheStats s = cache->Stats();
  EXPECT_LE(s.bytes, 450u);
  EXPECT_EQ(s.pinned_bytes, 0u);
  EXPECT_GT(s.evictions, 0u);
  EXPECT_EQ(s.hits + s.misses, 800u);
  // The accounting matches the directory.
  uint64_t on_disk = 0, offs = 0;
  for (const auto& f : fs::directory_iterator(dir)) {
    on_disk += f.file_size();
    if (f.path().extension() == ".off") ++offs;
  }
  EXPECT_EQ(on_disk, s.bytes);
  EXPECT_EQ(offs, s.entries);
}

}  // namespace
}  // namespace zephon::pipeline

namespace zephon::pipeline {
namespace {

TEST(TokenCacheTest, LossMaskFilesCountWithTheirEntryAndGoWithIt) {
  const std::string dir = TempDir();
  WriteEntry(dir, "aaaa", 40);
  WriteFile(dir + "/aaaa.msk", std::string(10, '\1'));  // one byte a token
  WriteFile(dir + "/eeee.msk", "01");                    // an eviction cut short, old
  SetMtimeAgo(dir + "/eeee.msk", absl::Hours(1));
  auto cache = TokenCache::Create(dir, 0);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ((*cache)->Stats().bytes, 16u + 40 + 10);
  EXPECT_EQ((*cache)->Stats().stale_removed, 1u);
  EXPECT_FALSE(Exists(dir + "/eeee.msk"));
  // Over a budget of 1 byte, the unpinned entry goes, .msk included.
  auto tight = TokenCache::Create(dir, 1);
  ASSERT_TRUE(tight.ok()) << tight.status();
  (void)(*tight)->Stats();  // waits for the scan
  EXPECT_FALSE(Exists(dir + "/aaaa.off"));
  EXPECT_FALSE(Exists(dir + "/aaaa.msk"));
}

TEST(TokenCacheTest, AcquireAfterCreateSeesTheScannedEntries) {
  // The scan runs on its own thread; what Acquire and Stats see is its result, never a
  // half-scanned directory.
  const std::string dir = TempDir();
  for (int i = 0; i < 300; ++i) WriteEntry(dir, absl::StrCat("k", i), 10);
  auto cache = *TokenCache::Create(dir, 0);
  TokenCache::Pin pin = cache->Acquire("k299");
  pin.Hit();
  const TokenCacheStats s = cache->Stats();
  EXPECT_EQ(s.adopted, 300u);
  EXPECT_EQ(s.entries, 300u);
  EXPECT_EQ(s.hits, 1u);
}

TEST(TokenCacheTest, PayloadFilesCountWithTheirEntryAndGoWithIt) {
  const std::string dir = TempDir();
  WriteEntry(dir, "aaaa", 40);
  WriteFile(dir + "/aaaa.pay", std::string(30, 'x'));   // keep_payload's source records
  WriteFile(dir + "/aaaa.pao", std::string(16, '\0'));  // their offsets
  WriteFile(dir + "/eeee.pay", "{}");                    // an eviction cut short, old
  SetMtimeAgo(dir + "/eeee.pay", absl::Hours(1));
  auto cache = TokenCache::Create(dir, 0);
  ASSERT_TRUE(cache.ok()) << cache.status();
  EXPECT_EQ((*cache)->Stats().bytes, 16u + 40 + 30 + 16);
  EXPECT_FALSE(Exists(dir + "/eeee.pay"));
  auto tight = TokenCache::Create(dir, 1);
  ASSERT_TRUE(tight.ok()) << tight.status();
  (void)(*tight)->Stats();  // waits for the scan
  EXPECT_FALSE(Exists(dir + "/aaaa.pay"));
  EXPECT_FALSE(Exists(dir + "/aaaa.pao"));
}

}  // namespace
}  // namespace zephon::pipeline
