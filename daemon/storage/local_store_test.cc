#include "daemon/storage/local_store.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fake_env.h"
#include "common/temp_dir_testing.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

// Every directory entry name under `dir`, recursively, relative to it.
void AllEntries(const std::string& dir, const std::string& rel, std::vector<std::string>* out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  while (struct dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    out->push_back(rel + name);
    AllEntries(dir + "/" + name, rel + name + "/", out);
  }
  closedir(d);
}

class LocalStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir("local_store") + "/store";  // Open creates it
    auto store = LocalStore::Open(root_);
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(store).value();
  }

  std::string root_;
  std::unique_ptr<LocalStore> store_;
};

TEST_F(LocalStoreTest, PutThenGetRoundTripsAndCreatesParents) {
  ASSERT_TRUE(store_->Put("ckpt/round-1/rank0.bin", "hello world").ok());
  auto got = store_->Get("ckpt/round-1/rank0.bin");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "hello world");
  struct stat st;
  EXPECT_EQ(stat((root_ + "/ckpt/round-1/rank0.bin").c_str(), &st), 0);
}

TEST_F(LocalStoreTest, PutReplacesWholeObject) {
  ASSERT_TRUE(store_->Put("k", "a long first value").ok());
  ASSERT_TRUE(store_->Put("k", "short").ok());
  EXPECT_EQ(*store_->Get("k"), "short");
  ASSERT_TRUE(store_->Put("empty", "").ok());
  EXPECT_EQ(*store_->Get("empty"), "");
}

TEST_F(LocalStoreTest, BinaryBytesSurvive) {
  const std::string bytes("a\0b\xff\n", 5);
  ASSERT_TRUE(store_->Put("bin", bytes).ok());
  EXPECT_EQ(*store_->Get("bin"), bytes);
}

TEST_F(LocalStoreTest, GetRangeTruncatesAtEndAndRejectsPastEnd) {
  ASSERT_TRUE(store_->Put("r", "0123456789").ok());
  EXPECT_EQ(*store_->GetRange("r", 0, 4), "0123");
  EXPECT_EQ(*store_->GetRange("r", 3, 4), "3456");
  EXPECT_EQ(*store_->GetRange("r", 8, 100), "89");
  EXPECT_EQ(*store_->GetRange("r", 10, 5), "");
  EXPECT_EQ(*store_->GetRange("r", 2, 0), "");
  auto past = store_->GetRange("r", 11, 1);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_TRUE(absl::StrContains(past.status().message(), root_ + "/r")) << past.status();
}

TEST_F(LocalStoreTest, HeadReportsSizeAndMtime) {
  const absl::Time before = absl::Now() - absl::Seconds(5);
  ASSERT_TRUE(store_->Put("a/b", "12345").ok());
  auto info = store_->Head("a/b");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->key, "a/b");
  EXPECT_EQ(info->size, 5u);
  EXPECT_GT(info->mtime, before);
  EXPECT_LT(info->mtime, absl::Now() + absl::Seconds(5));
}

TEST_F(LocalStoreTest, VersionChangesWhenTheObjectIsReplaced) {
  ASSERT_TRUE(store_->Put("v", "one").ok());
  auto first = store_->Head("v");
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->version.empty());
  EXPECT_EQ(store_->Head("v")->version, first->version);  // stable while unchanged
  ASSERT_TRUE(store_->Put("v", "two").ok());  // same size, new inode (rename)
  EXPECT_NE(store_->Head("v")->version, first->version);
  auto listed = store_->List("v");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].version, store_->Head("v")->version);
}

TEST_F(LocalStoreTest, ConditionalReadsOfTheCurrentVersionReturnTheBytes) {
  ASSERT_TRUE(store_->Put("c/obj", "0123456789").ok());
  const std::string v = store_->Head("c/obj")->version;
  EXPECT_EQ(*store_->Get("c/obj", v), "0123456789");
  EXPECT_EQ(*store_->GetRange("c/obj", 2, 3, v), "234");
  EXPECT_EQ(*store_->GetRange("c/obj", 8, 100, v), "89");
  EXPECT_EQ(*store_->GetRange("c/obj", 10, 5, v), "");
  EXPECT_EQ(store_->GetRange("c/obj", 11, 1, v).status().code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(store_->Get("c/missing", v).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(LocalStoreTest, AReplacedObjectFailsConditionalReadsNamingThePath) {
  ASSERT_TRUE(store_->Put("c/obj", "old bytes!").ok());
  const std::string v1 = store_->Head("c/obj")->version;
  ASSERT_TRUE(store_->Put("c/obj", "new bytes!").ok());  // same size, new inode
  const std::string v2 = store_->Head("c/obj")->version;
  ASSERT_NE(v1, v2);
  for (const absl::Status& s : {store_->GetRange("c/obj", 0, 4, v1).status(),
                                store_->Get("c/obj", v1).status(),
                                // The version is checked before the offset.
                                store_->GetRange("c/obj", 50, 1, v1).status()}) {
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_TRUE(IsVersionMismatch(s)) << s;
    EXPECT_EQ(VersionMismatchFound(s), v2) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), root_ + "/c/obj")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), "changed")) << s;
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("expected version '", v1, "'")))
        << s;
    EXPECT_TRUE(absl::StrContains(s.message(), absl::StrCat("found '", v2, "'"))) << s;
  }
  // An empty if_version is an unconditional read of whatever is there now.
  EXPECT_EQ(*store_->GetRange("c/obj", 0, 3, ""), "new");
  EXPECT_EQ(*store_->GetRange("c/obj", 0, 3), "new");
  EXPECT_EQ(*store_->Get("c/obj", v2), "new bytes!");
}

TEST_F(LocalStoreTest, AnObjectRewrittenInPlaceFailsConditionalReads) {
  // `cp new old` keeps the inode: the size (and mtime) in the version still move.
  ASSERT_TRUE(store_->Put("c/inplace", "0123456789").ok());
  const std::string v1 = store_->Head("c/inplace")->version;
  const std::string path = root_ + "/c/inplace";
  struct stat before;
  ASSERT_EQ(stat(path.c_str(), &before), 0);
  FILE* f = fopen(path.c_str(), "w");  // truncates in place
  ASSERT_NE(f, nullptr);
  fputs("shorter", f);
  fclose(f);
  struct stat after;
  ASSERT_EQ(stat(path.c_str(), &after), 0);
  ASSERT_EQ(before.st_ino, after.st_ino);
  const absl::Status s = store_->GetRange("c/inplace", 0, 4, v1).status();
  EXPECT_TRUE(IsVersionMismatch(s)) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), path)) << s;
}

TEST_F(LocalStoreTest, OtherFailedPreconditionsAreNotVersionMismatches) {
  ASSERT_TRUE(store_->Put("dir/child", "x").ok());
  const absl::Status s = store_->GetRange("dir", 0, 1, "1-2-3").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;  // not a regular file
  EXPECT_FALSE(IsVersionMismatch(s)) << s;
  EXPECT_EQ(VersionMismatchFound(s), "");
}

TEST_F(LocalStoreTest, ListIsRecursiveSortedAndPrefixFiltered) {
  for (const char* k : {"run/b/2", "run/a/1", "run/a/10", "runner/x", "other/y", "top"}) {
    ASSERT_TRUE(store_->Put(k, k).ok());
  }
  auto keys = [](const std::vector<ObjectInfo>& infos) {
    std::vector<std::string> out;
    for (const auto& i : infos) out.push_back(i.key);
    return out;
  };
  auto all = store_->List("");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(keys(*all), (std::vector<std::string>{"other/y", "run/a/1", "run/a/10",
                                                  "run/b/2", "runner/x", "top"}));
  EXPECT_EQ(keys(*store_->List("run/")),
            (std::vector<std::string>{"run/a/1", "run/a/10", "run/b/2"}));
  EXPECT_EQ(keys(*store_->List("run")),
            (std::vector<std::string>{"run/a/1", "run/a/10", "run/b/2", "runner/x"}));
  EXPECT_EQ(keys(*store_->List("run/a/1")), (std::vector<std::string>{"run/a/1", "run/a/10"}));
  EXPECT_EQ((*store_->List("run/a/1"))[0].size, 7u);
  auto none = store_->List("nothing/here/");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

std::vector<std::string> Keys(const std::vector<ObjectInfo>& infos) {
  std::vector<std::string> out;
  for (const auto& i : infos) out.push_back(i.key);
  return out;
}

TEST_F(LocalStoreTest, ListDirectoryListsOneLevelAndRollsUpDeeperKeys) {
  for (const char* k : {"run/b/2", "run/a/1", "run/a/10", "run/a/deep/er", "run/top.bin",
                        "run/.hidden", "runner/x", "other/y", "top", "run/c/d/e/only-deep"}) {
    ASSERT_TRUE(store_->Put(k, k).ok());
  }
  ASSERT_EQ(mkdir((root_ + "/run/empty").c_str(), 0755), 0);  // no object: not listed
  ASSERT_EQ(mkdir((root_ + "/run/empty/sub").c_str(), 0755), 0);

  auto root = store_->ListDirectory("");
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(Keys(root->objects), (std::vector<std::string>{"top"}));
  EXPECT_EQ(root->common_prefixes, (std::vector<std::string>{"other/", "run/", "runner/"}));

  auto run = store_->ListDirectory("run/");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(Keys(run->objects), (std::vector<std::string>{"run/.hidden", "run/top.bin"}));
  EXPECT_EQ(run->objects[1].size, 11u);
  EXPECT_EQ(run->objects[1].version, store_->Head("run/top.bin")->version);
  EXPECT_EQ(run->common_prefixes, (std::vector<std::string>{"run/a/", "run/b/", "run/c/"}));

  // A prefix inside a name filters that level, as S3's delimiter=/ listing does.
  auto named = store_->ListDirectory("run/a/1");
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(Keys(named->objects), (std::vector<std::string>{"run/a/1", "run/a/10"}));
  EXPECT_TRUE(named->common_prefixes.empty());
  auto partial = store_->ListDirectory("ru");
  ASSERT_TRUE(partial.ok()) << partial.status();
  EXPECT_TRUE(partial->objects.empty());
  EXPECT_EQ(partial->common_prefixes, (std::vector<std::string>{"run/", "runner/"}));
  auto dir_name = store_->ListDirectory("run/a");  // "run/a" itself is a directory
  ASSERT_TRUE(dir_name.ok()) << dir_name.status();
  EXPECT_TRUE(dir_name->objects.empty());
  EXPECT_EQ(dir_name->common_prefixes, (std::vector<std::string>{"run/a/"}));

  // Missing directories, a file in place of one, and prefixes no key can have: empty.
  for (const char* prefix : {"nothing/here/", "top/", "run//", "/run/", "../", "./run/",
                             "run/../run/", "run/empty/"}) {
    auto none = store_->ListDirectory(prefix);
    ASSERT_TRUE(none.ok()) << prefix << ": " << none.status();
    EXPECT_TRUE(none->objects.empty()) << prefix;
    EXPECT_TRUE(none->common_prefixes.empty()) << prefix;
  }
}

TEST_F(LocalStoreTest, ListDirectoryIsListCutAtTheNextSlash) {
  for (const char* k : {"a/b/c/d", "a/b/x", "a/bc", "a/b.c", "a/b-/z", "ab", "a/.d/e", "z"}) {
    ASSERT_TRUE(store_->Put(k, "v").ok());
  }
  const std::string tmp = absl::StrCat(root_, "/a/", kLocalTempPrefix, "bc.XyZ123");
  FILE* f = fopen(tmp.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  for (const char* prefix : {"", "a", "a/", "a/b", "a/b/", "a/b/c", "a/b/c/", "a/.", "ab", "q"}) {
    auto all = store_->List(prefix);
    auto level = store_->ListDirectory(prefix);
    ASSERT_TRUE(all.ok() && level.ok()) << prefix;
    std::vector<std::string> objects, common;
    for (const ObjectInfo& info : *all) {
      const size_t slash = info.key.find('/', std::string(prefix).size());
      if (slash == std::string::npos) {
        objects.push_back(info.key);
      } else if (common.empty() || common.back() != info.key.substr(0, slash + 1)) {
        common.push_back(info.key.substr(0, slash + 1));
      }
    }
    EXPECT_EQ(Keys(level->objects), objects) << prefix;
    EXPECT_EQ(level->common_prefixes, common) << prefix;
  }
}

TEST_F(LocalStoreTest, DeleteRemovesAndIsIdempotent) {
  ASSERT_TRUE(store_->Put("d/x", "1").ok());
  ASSERT_TRUE(store_->Delete("d/x").ok());
  EXPECT_EQ(store_->Get("d/x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_->Delete("d/x").ok());
  EXPECT_TRUE(store_->List("d/")->empty());
}

TEST_F(LocalStoreTest, AtomicPutLeavesNoTempFile) {
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(store_->Put("dir/obj", std::string(1000 * (i + 1), 'x')).ok());
  }
  std::vector<std::string> entries;
  AllEntries(root_, "", &entries);
  EXPECT_EQ(entries, (std::vector<std::string>{"dir", "dir/obj"}));
}

TEST_F(LocalStoreTest, ListSkipsInFlightTempFiles) {
  ASSERT_TRUE(store_->Put("real", "1").ok());
  const std::string tmp = absl::StrCat(root_, "/", kLocalTempPrefix, "real.AbC123");
  FILE* f = fopen(tmp.c_str(), "w");
  ASSERT_NE(f, nullptr);
  fclose(f);
  auto all = store_->List("");
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].key, "real");
}

TEST_F(LocalStoreTest, FailedPutCleansUpAndKeepsOldObject) {
  // A directory sits where the object should go: rename fails, temp file is removed.
  ASSERT_TRUE(store_->Put("blocker/child", "x").ok());
  auto st = store_->Put("blocker", "y");
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(absl::StrContains(st.message(), root_ + "/blocker")) << st;
  std::vector<std::string> entries;
  AllEntries(root_, "", &entries);
  EXPECT_EQ(entries, (std::vector<std::string>{"blocker", "blocker/child"}));
  EXPECT_EQ(*store_->Get("blocker/child"), "x");
}

TEST_F(LocalStoreTest, ErrorsNameThePath) {
  auto missing = store_->Get("no/such/key");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(missing.status().message(), root_ + "/no/such/key"))
      << missing.status();
  auto head = store_->Head("nope");
  EXPECT_EQ(head.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(head.status().message(), root_ + "/nope")) << head.status();
  auto range = store_->GetRange("nope", 0, 1);
  EXPECT_EQ(range.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(range.status().message(), root_ + "/nope"));
}

TEST_F(LocalStoreTest, RejectsInvalidKeys) {
  for (const char* bad : {"", "/abs", "a//b", "a/../b", "..", "./x", "a/"}) {
    EXPECT_EQ(store_->Put(bad, "x").code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(store_->Get(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST_F(LocalStoreTest, OpenRejectsAFileAsRoot) {
  ASSERT_TRUE(store_->Put("plain", "x").ok());
  auto st = LocalStore::Open(root_ + "/plain");
  EXPECT_EQ(st.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(st.status().message(), root_ + "/plain"));
}

// Put and Delete go through the store's Env: an injected write fault fails the Put
// (naming the path), leaves the old object and no temp file; an injected removal fault
// fails the Delete; with the faults spent both work.
TEST(LocalStoreEnvTest, PutAndDeleteGoThroughTheEnv) {
  const std::string root = testing::MakeTempDir("local_store_env") + "/store";
  FakeEnv env;
  auto store = LocalStore::Open(root, &env);
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Put("run/leader", "old").ok());

  env.FailNext(FakeEnv::Op::kWrite, 1, ENOSPC);
  const absl::Status put = (*store)->Put("run/leader", "new bytes");
  EXPECT_EQ(put.code(), absl::StatusCode::kResourceExhausted) << put;
  EXPECT_TRUE(absl::StrContains(put.message(), root + "/run")) << put;
  EXPECT_EQ(env.faults_fired(FakeEnv::Op::kWrite), 1);
  EXPECT_EQ(*(*store)->Get("run/leader"), "old");
  std::vector<std::string> names;
  AllEntries(root, "", &names);
  for (const std::string& name : names) {
    EXPECT_FALSE(absl::StrContains(name, kLocalTempPrefix)) << name;
  }

  env.FailNext(FakeEnv::Op::kRemove, 1, EACCES);
  EXPECT_EQ((*store)->Delete("run/leader").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(env.faults_fired(FakeEnv::Op::kRemove), 1);
  EXPECT_TRUE((*store)->Head("run/leader").ok());

  ASSERT_TRUE((*store)->Put("run/leader", "new bytes").ok());
  EXPECT_EQ(*(*store)->Get("run/leader"), "new bytes");
  ASSERT_TRUE((*store)->Delete("run/leader").ok());
  EXPECT_TRUE((*store)->Delete("run/leader").ok());  // absent: still OK
  EXPECT_EQ((*store)->Head("run/leader").status().code(), absl::StatusCode::kNotFound);
}

// Reads, listings and Head go through the store's Env too: each injected fault surfaces
// as the store's error, naming the path, and the next call works.
TEST(LocalStoreEnvTest, ReadsListingsAndHeadGoThroughTheEnv) {
  const std::string root = testing::MakeTempDir("local_store_env") + "/store";
  FakeEnv env;
  auto opened = LocalStore::Open(root, &env);
  ASSERT_TRUE(opened.ok()) << opened.status();
  LocalStore& store = **opened;
  ASSERT_TRUE(store.Put("d/obj", "0123456789").ok());
  const std::string path = root + "/d/obj";

  env.FailNext(FakeEnv::Op::kRead, 2, EIO);
  for (const absl::Status& read :
       {store.Get("d/obj").status(), store.GetRange("d/obj", 2, 3).status()}) {
    EXPECT_EQ(read.code(), absl::StatusCode::kUnknown) << read;  // EIO
    EXPECT_TRUE(absl::StrContains(read.message(), "cannot read " + path)) << read;
  }
  EXPECT_EQ(env.faults_fired(FakeEnv::Op::kRead), 2);
  EXPECT_EQ(*store.GetRange("d/obj", 2, 3), "234");

  env.FailNext(FakeEnv::Op::kList, 2, EACCES);
  const absl::Status list = store.List("d/").status();
  EXPECT_TRUE(absl::IsPermissionDenied(list)) << list;
  EXPECT_TRUE(absl::StrContains(list.message(), root)) << list;
  const absl::Status level = store.ListDirectory("d/").status();
  EXPECT_TRUE(absl::IsPermissionDenied(level)) << level;
  EXPECT_TRUE(absl::StrContains(level.message(), root + "/d")) << level;
  EXPECT_EQ(store.List("d/")->size(), 1u);

  env.FailNext(FakeEnv::Op::kStat, 1, EACCES);
  const absl::Status head = store.Head("d/obj").status();
  EXPECT_TRUE(absl::IsPermissionDenied(head)) << head;
  EXPECT_TRUE(absl::StrContains(head.message(), path)) << head;
  EXPECT_EQ(env.faults_fired(FakeEnv::Op::kStat), 1);

  // The version keeps its format ("<size>-<mtime ns>-<inode>"): shard cache entries on
  // disk are named after it, so a change would orphan them.
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  const int64_t mtime_ns = int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec;
  EXPECT_EQ(store.Head("d/obj")->version, absl::StrCat("10-", mtime_ns, "-", st.st_ino));
}

}  // namespace
}  // namespace zephon::storage
