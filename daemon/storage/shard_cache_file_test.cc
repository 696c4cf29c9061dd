#include "daemon/storage/shard_cache_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/temp_dir_testing.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

std::string TempDir(const std::string& name) {
  return testing::MakeTempDir("shard_cache_file_" + name);
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Writes the entry of `identity` into dir; returns its path.
std::string WriteEntry(const std::string& dir, const std::string& identity,
                       const std::string& payload) {
  const std::string path = absl::StrCat(dir, "/", EntryFileName(identity));
  const absl::Status s = WriteEntryFile(path, identity, payload);
  EXPECT_TRUE(s.ok()) << s;
  return path;
}

void SetMtime(const std::string& path, time_t seconds) {
  const struct timeval tv[2] = {{seconds, 0}, {seconds, 0}};
  ASSERT_EQ(utimes(path.c_str(), tv), 0);
}

TEST(ShardCacheFileTest, NamesAreTheSha256PrefixOfTheIdentity) {
  const std::string a = EntryFileName(std::string("id\0one", 6));
  EXPECT_EQ(a.size(), 32u + 4u);
  EXPECT_TRUE(absl::EndsWith(a, ".blk"));
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), 32u);
  EXPECT_EQ(a, EntryFileName(std::string("id\0one", 6)));
  EXPECT_NE(a, EntryFileName(std::string("id\0two", 6)));
  // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad.
  EXPECT_EQ(EntryFileName("abc"), "ba7816bf8f01cfea414140de5dae2223.blk");
}

TEST(ShardCacheFileTest, TheHeaderIsMagicSizeCrcAndIdentityLittleEndian) {
  const std::string header = EncodeEntryHeader("ident", "123456789");
  ASSERT_EQ(header.size(), EntryHeaderBytes("ident"));
  ASSERT_EQ(header.size(), 24u + 5u);
  EXPECT_EQ(header.substr(0, 8), "ZSCACHE1");
  EXPECT_EQ(header.substr(8, 8), std::string("\x09\0\0\0\0\0\0\0", 8));
  // The CRC-32 check value of "123456789" is 0xcbf43926.
  EXPECT_EQ(EntryCrc32("123456789", 9), 0xcbf43926u);
  EXPECT_EQ(header.substr(16, 4), "\x26\x39\xf4\xcb");
  EXPECT_EQ(header.substr(20, 4), std::string("\x05\0\0\0", 4));
  EXPECT_EQ(header.substr(24), "ident");
  EXPECT_EQ(EntryCrc32("", 0), 0u);
}

TEST(ShardCacheFileTest, AWrittenFileValidatesAndMapsItsPayload) {
  const std::string dir = TempDir("roundtrip");
  const std::string identity("obj\0whole", 9);
  const std::string payload = "the payload bytes";
  const std::string path = WriteEntry(dir, identity, payload);
  EXPECT_EQ(Files(dir), std::vector<std::string>{EntryFileName(identity)});  // no temp left
  EXPECT_EQ(Slurp(path), EncodeEntryHeader(identity, payload) + payload);
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  EntryFileHeader h;
  ASSERT_TRUE(ReadEntryHeader(path, &h));
  EXPECT_EQ(h.identity, identity);
  EXPECT_EQ(h.payload_bytes, payload.size());
  EXPECT_EQ(h.crc, EntryCrc32(payload.data(), payload.size()));
  EXPECT_EQ(h.file_bytes, EntryHeaderBytes(identity) + payload.size());

  absl::StatusOr<EntryFileMap> map = MapEntryFile(path, identity, payload.size(), h.crc);
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_TRUE(map->mapped());
  EXPECT_EQ(std::string(map->payload(), payload.size()), payload);
  EntryFileMap moved = std::move(map).value();
  EXPECT_TRUE(moved.mapped());
  moved.Reset();
  EXPECT_FALSE(moved.mapped());
}

TEST(ShardCacheFileTest, ARewriteReplacesTheFileWhole) {
  const std::string dir = TempDir("rewrite");
  const std::string path = WriteEntry(dir, "id", "first version");
  WriteEntry(dir, "id", "second");
  EntryFileHeader h;
  ASSERT_TRUE(ReadEntryHeader(path, &h));
  EXPECT_EQ(h.payload_bytes, 6u);
  EXPECT_EQ(Files(dir).size(), 1u);
}

TEST(ShardCacheFileTest, AShortFileIsRejected) {
  const std::string dir = TempDir("short");
  const std::string path = WriteEntry(dir, "id", "0123456789");
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(EntryHeaderBytes("id") + 9)), 0);
  EntryFileHeader h;
  EXPECT_FALSE(ReadEntryHeader(path, &h));
  const absl::StatusOr<EntryFileMap> map = MapEntryFile(path, "id", 10, std::nullopt);
  EXPECT_EQ(map.status().code(), absl::StatusCode::kDataLoss) << map.status();
  EXPECT_TRUE(absl::StrContains(map.status().message(), path));
}

TEST(ShardCacheFileTest, ATornHeaderIsRejected) {
  const std::string dir = TempDir("torn");
  const std::string path = WriteEntry(dir, "id", "0123456789");
  for (const off_t size : {0, 7, 20, 25}) {  // inside the magic, the fixed part, the identity
    ASSERT_EQ(truncate(path.c_str(), size), 0);
    EntryFileHeader h;
    EXPECT_FALSE(ReadEntryHeader(path, &h)) << size;
  }
}

TEST(ShardCacheFileTest, ALongerFileIsRejected) {
  const std::string dir = TempDir("long");
  const std::string path = WriteEntry(dir, "id", "0123456789");
  std::ofstream(path, std::ios::app | std::ios::binary) << "x";
  EntryFileHeader h;
  EXPECT_FALSE(ReadEntryHeader(path, &h));
  EXPECT_EQ(MapEntryFile(path, "id", 10, std::nullopt).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(ShardCacheFileTest, AForeignMagicOrAHugeIdentityIsRejected) {
  const std::string dir = TempDir("foreign");
  const std::string path = WriteEntry(dir, "id", "0123456789");
  std::string bytes = Slurp(path);
  bytes[7] = '2';  // "ZSCACHE2"
  std::ofstream(path, std::ios::trunc | std::ios::binary) << bytes;
  EntryFileHeader h;
  EXPECT_FALSE(ReadEntryHeader(path, &h));

  // A header claiming an identity over 64 KiB, with a file of the matching size.
  const std::string big(kMaxEntryIdentityBytes + 1, 'i');
  const std::string big_path = WriteEntry(dir, big, "p");
  EXPECT_FALSE(ReadEntryHeader(big_path, &h));
  const std::string max(kMaxEntryIdentityBytes, 'i');
  EXPECT_TRUE(ReadEntryHeader(WriteEntry(dir, max, "p"), &h));
}

TEST(ShardCacheFileTest, ACorruptPayloadPassesTheHeaderButFailsItsCrc) {
  const std::string dir = TempDir("crc");
  const std::string payload = "0123456789";
  const std::string path = WriteEntry(dir, "id", payload);
  {
    const int fd = open(path.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(pwrite(fd, "X", 1, static_cast<off_t>(EntryHeaderBytes("id") + 3)), 1);
    close(fd);
  }
  EntryFileHeader h;
  ASSERT_TRUE(ReadEntryHeader(path, &h));  // the size is right; the CRC is checked on map
  const absl::StatusOr<EntryFileMap> checked = MapEntryFile(path, "id", 10, h.crc);
  EXPECT_EQ(checked.status().code(), absl::StatusCode::kDataLoss) << checked.status();
  EXPECT_TRUE(MapEntryFile(path, "id", 10, std::nullopt).ok());  // unchecked: maps
}

TEST(ShardCacheFileTest, AMissingFileIsNotAnEntry) {
  const std::string dir = TempDir("missing");
  EntryFileHeader h;
  EXPECT_FALSE(ReadEntryHeader(dir + "/nope.blk", &h));
  EXPECT_EQ(MapEntryFile(dir + "/nope.blk", "id", 1, std::nullopt).status().code(),
            absl::StatusCode::kInternal);
}

TEST(ShardCacheFileTest, AFifoIsRejectedWithoutBlocking) {
  const std::string dir = TempDir("fifo");
  const std::string path = dir + "/fifo.blk";
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  EntryFileHeader h;
  EXPECT_FALSE(ReadEntryHeader(path, &h));
}

TEST(ShardCacheFileTest, WritingIntoAMissingDirectoryFailsAndLeavesNothing) {
  const std::string dir = TempDir("nodir");
  std::filesystem::remove_all(dir);
  const absl::Status s = WriteEntryFile(dir + "/" + EntryFileName("id"), "id", "p");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), dir)) << s;
  EXPECT_FALSE(std::filesystem::exists(dir));
}

TEST(ShardCacheFileTest, TheScanListsValidEntriesOldestFirstAndDeletesStrays) {
  const std::string dir = TempDir("scan");
  const std::string newer = WriteEntry(dir, "newer", "n");
  const std::string older = WriteEntry(dir, "older", "oo");
  SetMtime(newer, 2000000000);
  SetMtime(older, 1000000000);
  const std::string corrupt = WriteEntry(dir, "short", "0123");
  ASSERT_EQ(truncate(corrupt.c_str(), 10), 0);
  // A valid file under another entry's name.
  std::filesystem::copy_file(older, dir + "/" + EntryFileName("elsewhere"));
  std::ofstream(dir + "/.tmp." + EntryFileName("x") + ".1.0") << "partial";
  std::ofstream(dir + "/.lock") << "";
  std::ofstream(dir + "/notes.txt") << "kept";

  std::vector<ScannedEntryFile> found;
  EXPECT_EQ(ScanEntryDir(dir, &found), 3u);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].path, older);
  EXPECT_EQ(found[0].header.identity, "older");
  EXPECT_EQ(found[0].header.payload_bytes, 2u);
  EXPECT_EQ(found[0].header.mtime, absl::FromUnixSeconds(1000000000));
  EXPECT_EQ(found[1].path, newer);
  std::vector<std::string> left = {".lock", EntryFileName("newer"), EntryFileName("older"),
                                   "notes.txt"};
  std::sort(left.begin(), left.end());
  EXPECT_EQ(Files(dir), left);

  std::vector<ScannedEntryFile> none;
  EXPECT_EQ(ScanEntryDir(dir + "/missing", &none), 0u);
  EXPECT_TRUE(none.empty());
}

TEST(ShardCacheFileTest, EnsureEntryDirCreatesParentsPrivately) {
  const std::string dir = TempDir("mkdir");
  const std::string deep = dir + "/a/b/c";
  ASSERT_TRUE(EnsureEntryDir(deep).ok());
  struct stat st;
  ASSERT_EQ(stat(deep.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_TRUE(EnsureEntryDir(deep).ok());  // already there
  std::ofstream(dir + "/file") << "x";
  EXPECT_EQ(EnsureEntryDir(dir + "/file").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(EnsureEntryDir(dir + "/file/sub").code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace zephon::storage
