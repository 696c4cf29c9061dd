#include "daemon/storage/shard_cache_disk.h"

#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/temp_dir_testing.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

std::string TempDir(const std::string& name) {
  return testing::MakeTempDir("shard_cache_disk_" + name);
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

void WriteRaw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string WriteEntry(const std::string& dir, const std::string& identity,
                       const std::string& payload, time_t mtime) {
  const std::string path = absl::StrCat(dir, "/", EntryFileName(identity));
  EXPECT_TRUE(WriteEntryFile(path, identity, payload).ok());
  const struct timeval tv[2] = {{mtime, 0}, {mtime, 0}};
  EXPECT_EQ(utimes(path.c_str(), tv), 0);
  return path;
}

TEST(CacheDirLockTest, OneHolderAtATimeUntilReleased) {
  const std::string dir = TempDir("lock");
  absl::StatusOr<CacheDirLock> first = LockCacheDir(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->held());
  absl::StatusOr<CacheDirLock> second = LockCacheDir(dir);
  ASSERT_TRUE(absl::IsUnavailable(second.status())) << second.status();
  EXPECT_EQ(second.status().message(), "flock held");
  CacheDirLock moved = std::move(*first);
  EXPECT_FALSE(first->held());  // moved from: empty, and still no second holder
  EXPECT_TRUE(absl::IsUnavailable(LockCacheDir(dir).status()));
  moved.Reset();
  EXPECT_TRUE(LockCacheDir(dir).ok());
}

TEST(CacheDirLockTest, APlantedSymlinkIsUnavailableAndItsTargetUntouched) {
  const std::string dir = TempDir("symlink");
  const std::string target = dir + "/victim";
  WriteRaw(target, "keep");
  ASSERT_EQ(symlink(target.c_str(), (dir + "/.lock").c_str()), 0);
  absl::StatusOr<CacheDirLock> lock = LockCacheDir(dir);
  EXPECT_TRUE(absl::IsUnavailable(lock.status())) << lock.status();
  std::ifstream in(target);
  std::string text;
  in >> text;
  EXPECT_EQ(text, "keep");
}

TEST(OpenCacheDirTest, MakesLocksThenScansOldestFirstAndDeletesStrays) {
  const std::string dir = TempDir("open") + "/a/b";
  ASSERT_TRUE(EnsureEntryDir(dir).ok());
  const std::string newer = WriteEntry(dir, "id-new", "new payload", 2000000000);
  const std::string older = WriteEntry(dir, "id-old", "old", 1000000000);
  const std::string temp = dir + "/.tmp.half-written";
  WriteRaw(temp, "x");
  const std::string foreign = dir + "/0123456789abcdef0123456789abcdef.blk";
  WriteRaw(foreign, "not an entry");

  bool scanned_while_locked = false;
  absl::StatusOr<OpenedCacheDir> opened = OpenCacheDir(dir, [&] {
    scanned_while_locked = absl::IsUnavailable(LockCacheDir(dir).status()) && Exists(temp);
  });
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE(scanned_while_locked);  // before_scan runs with the lock held, before the scan
  EXPECT_TRUE(opened->lock.held());
  ASSERT_EQ(opened->files.size(), 2u);
  EXPECT_EQ(opened->files[0].path, older);
  EXPECT_EQ(opened->files[0].header.identity, "id-old");
  EXPECT_EQ(opened->files[1].path, newer);
  EXPECT_EQ(opened->rejected, 2u);
  EXPECT_FALSE(Exists(temp));
  EXPECT_FALSE(Exists(foreign));
}

TEST(OpenCacheDirTest, ADirectoryInUseIsUnavailableAndNotScanned) {
  const std::string dir = TempDir("busy");
  absl::StatusOr<CacheDirLock> held = LockCacheDir(dir);
  ASSERT_TRUE(held.ok());
  const std::string temp = dir + "/.tmp.other-daemons-write";
  WriteRaw(temp, "x");
  absl::StatusOr<OpenedCacheDir> opened = OpenCacheDir(dir, nullptr);
  EXPECT_TRUE(absl::IsUnavailable(opened.status())) << opened.status();
  EXPECT_TRUE(Exists(temp));  // the holder's files are its own
}

TEST(OpenCacheDirTest, AFileInPlaceOfTheDirectoryIsFailedPrecondition) {
  const std::string file = TempDir("file") + "/objects";
  WriteRaw(file, "x");
  absl::StatusOr<OpenedCacheDir> opened = OpenCacheDir(file, nullptr);
  EXPECT_TRUE(absl::IsFailedPrecondition(opened.status())) << opened.status();
  EXPECT_TRUE(absl::StrContains(opened.status().message(), file));
}

TEST(OpenCacheDirTest, APlantedLockSymlinkIsUnavailableAndNotFollowed) {
  // Someone who can write the cache directory plants ".lock" as a symlink to a file the
  // daemon may write (it often runs as root): opening must not go through it, and the
  // cache gets UNAVAILABLE, its cue to run in memory as when another daemon holds it.
  const std::string dir = TempDir("planted");
  const std::string target = dir + "-target";
  WriteRaw(target, "untouched");
  ASSERT_EQ(symlink(target.c_str(), (dir + "/.lock").c_str()), 0);
  absl::StatusOr<OpenedCacheDir> opened = OpenCacheDir(dir, nullptr);
  EXPECT_TRUE(absl::IsUnavailable(opened.status())) << opened.status();
  std::ifstream in(target);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "untouched");
  struct stat st;
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 9);
}

TEST(OpenCacheDirTest, AFifoNamedLikeAnEntryIsRejectedWithoutHangingTheScan) {
  const std::string dir = TempDir("fifo");
  const std::string fifo = dir + "/0123456789abcdef0123456789abcdef.blk";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  absl::StatusOr<OpenedCacheDir> opened = OpenCacheDir(dir, nullptr);  // returns at all
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_TRUE(opened->files.empty());
  EXPECT_EQ(opened->rejected, 1u);
  EXPECT_FALSE(Exists(fifo));
}

TEST(StoreEntryFileTest, WritesAndMapsThePayload) {
  const std::string dir = TempDir("store");
  const std::string path = absl::StrCat(dir, "/", EntryFileName("id"));
  bool written = false;
  absl::StatusOr<EntryFileMap> map = StoreEntryFile(path, "id", "payload bytes", &written);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_TRUE(written);
  EXPECT_EQ(std::string(map->payload(), 13), "payload bytes");
  EntryFileHeader header;
  ASSERT_TRUE(ReadEntryHeader(path, &header));
  EXPECT_EQ(header.identity, "id");
}

TEST(StoreEntryFileTest, ARefusedWriteIsNotWritten) {
  const std::string path = TempDir("refused") + "/missing/" + EntryFileName("id");
  bool written = true;
  absl::StatusOr<EntryFileMap> map = StoreEntryFile(path, "id", "payload", &written);
  EXPECT_FALSE(map.ok());
  EXPECT_FALSE(written);
}

TEST(PendingDeletesTest, AWriterWaitsForThePendingDeleteOfItsPath) {
  const std::string path = TempDir("pending") + "/x.blk";
  WriteRaw(path, "old");
  PendingDeletes deletes;
  EXPECT_TRUE(deletes.WaitUntilDeleted(path, absl::Now()));  // nothing pending
  deletes.Add(path);
  EXPECT_FALSE(deletes.WaitUntilDeleted(path, absl::Now() + absl::Milliseconds(20)));
  std::thread deleter([&] {
    absl::SleepFor(absl::Milliseconds(50));
    deletes.Delete({path});
  });
  EXPECT_TRUE(deletes.WaitUntilDeleted(path, absl::Now() + absl::Seconds(60)));
  EXPECT_FALSE(Exists(path));
  deleter.join();
}

TEST(PendingDeletesTest, APathAddedTwiceStaysPendingUntilBothDeletes) {
  const std::string path = TempDir("twice") + "/x.blk";
  PendingDeletes deletes;
  deletes.Add(path);
  deletes.Add(path);
  deletes.Delete({path});
  EXPECT_FALSE(deletes.WaitUntilDeleted(path, absl::Now()));
  deletes.Delete({path});
  EXPECT_TRUE(deletes.WaitUntilDeleted(path, absl::Now()));
}

}  // namespace
}  // namespace zephon::storage
