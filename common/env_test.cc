#include "common/env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "common/fake_env.h"
#include "common/temp_dir_testing.h"
#include "gtest/gtest.h"

namespace zephon {
namespace {

std::vector<std::string> Sorted(absl::StatusOr<std::vector<std::string>> names) {
  EXPECT_TRUE(names.ok()) << names.status();
  std::vector<std::string> out = names.ok() ? *names : std::vector<std::string>{};
  std::sort(out.begin(), out.end());
  return out;
}

TEST(DefaultEnvTest, IsOneInstanceOnTheRealClock) {
  EXPECT_EQ(Env::Default(), Env::Default());
  const absl::Time before = absl::Now();
  const absl::Time now = Env::Default()->Now();
  EXPECT_GE(now, before);
  EXPECT_LE(now, absl::Now());
}

TEST(DefaultEnvTest, FilesRoundTripAndErrorsNameThePath) {
  Env* env = Env::Default();
  const std::string dir = testing::MakeTempDir("env");
  const std::string path = dir + "/sub/a.bin";
  ASSERT_TRUE(env->WriteFileAtomically(path, "hello").ok());
  EXPECT_EQ(*env->ReadFile(path), "hello");
  absl::StatusOr<FileStat> st = env->Stat(path);
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->size, 5u);
  EXPECT_TRUE(st->is_regular);
  EXPECT_FALSE(st->is_directory);
  EXPECT_TRUE(env->Stat(dir + "/sub")->is_directory);
  EXPECT_EQ(Sorted(env->ListDirectory(dir + "/sub")), std::vector<std::string>{"a.bin"});

  ASSERT_TRUE(env->RemoveFile(path).ok());
  const absl::Status gone = env->RemoveFile(path);
  EXPECT_TRUE(absl::IsNotFound(gone)) << gone;
  EXPECT_NE(gone.message().find(path), std::string::npos) << gone;
  const absl::Status missing = env->ReadFile(path).status();
  EXPECT_TRUE(absl::IsNotFound(missing));
  EXPECT_NE(missing.message().find(path), std::string::npos) << missing;
  EXPECT_EQ(env->Stat(path).status().message(), "no such file: " + path);
  EXPECT_TRUE(absl::IsNotFound(env->ListDirectory(dir + "/nope").status()));
}

TEST(DefaultEnvTest, AnOpenFileReadsRangesAndKeepsItsInodeAcrossARename) {
  Env* env = Env::Default();
  const std::string dir = testing::MakeTempDir("env_open");
  const std::string path = dir + "/obj";
  ASSERT_TRUE(env->WriteFileAtomically(path, "0123456789").ok());
  absl::StatusOr<std::unique_ptr<ReadableFile>> file = env->OpenForRead(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(*(*file)->ReadAt(2, 3), "234");
  EXPECT_EQ(*(*file)->ReadAt(8, 100), "89");  // short at the end
  EXPECT_EQ(*(*file)->ReadAt(10, 5), "");
  EXPECT_EQ(*(*file)->ReadAt(0, UINT64_MAX), "0123456789");  // "the rest", not UINT64_MAX
  absl::StatusOr<FileStat> opened = (*file)->Stat();
  ASSERT_TRUE(opened.ok()) << opened.status();
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(opened->inode, static_cast<uint64_t>(st.st_ino));
  EXPECT_EQ(opened->mtime, absl::TimeFromTimespec(st.st_mtim));  // nanoseconds kept
  EXPECT_EQ(env->Stat(path)->inode, opened->inode);

  ASSERT_TRUE(env->WriteFileAtomically(path, "replaced").ok());  // a new inode
  EXPECT_EQ(*(*file)->ReadAt(0, 100), "0123456789");
  EXPECT_EQ((*file)->Stat()->size, 10u);
  EXPECT_NE(env->Stat(path)->inode, opened->inode);
}

TEST(DefaultEnvTest, MissingFilesAndDirectoriesAreNotFoundNamingThePath) {
  Env* env = Env::Default();
  const std::string dir = testing::MakeTempDir("env_missing");
  const absl::Status open = env->OpenForRead(dir + "/nope").status();
  EXPECT_TRUE(absl::IsNotFound(open)) << open;
  EXPECT_NE(open.message().find("cannot open " + dir + "/nope"), std::string::npos) << open;
  ASSERT_TRUE(env->WriteFileAtomically(dir + "/file", "x").ok());
  // A file where a directory is expected is as absent as a missing one.
  for (const std::string& missing : {dir + "/nope", dir + "/file", dir + "/file/sub"}) {
    const absl::Status listed = env->ListDirectory(missing).status();
    EXPECT_EQ(listed, absl::NotFoundError("no such directory: " + missing));
  }
}

TEST(DefaultEnvTest, MemfdIsSealable) {
  absl::StatusOr<int> fd = Env::Default()->CreateMemfd("zephon-env-test");
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_EQ(fcntl(*fd, F_ADD_SEALS, F_SEAL_GROW), 0) << "MFD_ALLOW_SEALING missing";
  EXPECT_NE(fcntl(*fd, F_GETFD) & FD_CLOEXEC, 0);
  ::close(*fd);
}

TEST(FakeEnvTest, ClockMovesOnlyWhenTold) {
  FakeEnv env(absl::FromUnixSeconds(1000));
  EXPECT_EQ(env.Now(), absl::FromUnixSeconds(1000));
  env.Advance(absl::Seconds(5));
  EXPECT_EQ(env.Now(), absl::FromUnixSeconds(1005));
  env.SleepFor(absl::Hours(1));  // returns at once
  EXPECT_EQ(env.Now(), absl::FromUnixSeconds(1005 + 3600));
  env.SetNow(absl::FromUnixSeconds(7));
  EXPECT_EQ(env.Now(), absl::FromUnixSeconds(7));
}

TEST(FakeEnvTest, InjectedWriteFaultLeavesNoPartialFileAndKeepsTheOldContent) {
  FakeEnv env;
  const std::string dir = testing::MakeTempDir("fake_env");
  const std::string path = dir + "/ckpt";
  ASSERT_TRUE(env.WriteFileAtomically(path, "old").ok());
  env.FailNext(FakeEnv::Op::kWrite, 1, ENOSPC);
  const absl::Status s = env.WriteFileAtomically(path, std::string(1 << 16, 'n'));
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find(path), std::string::npos) << s;
  EXPECT_EQ(env.faults_fired(FakeEnv::Op::kWrite), 1);
  EXPECT_EQ(*env.ReadFile(path), "old");
  EXPECT_EQ(Sorted(env.ListDirectory(dir)), std::vector<std::string>{"ckpt"});  // no temp file
  ASSERT_TRUE(env.WriteFileAtomically(path, "new").ok());  // the fault was for one write
  EXPECT_EQ(*env.ReadFile(path), "new");
}

TEST(FakeEnvTest, InjectedRenameFaultRemovesTheCompleteTempFile) {
  FakeEnv env;
  const std::string dir = testing::MakeTempDir("fake_env");
  env.FailNext(FakeEnv::Op::kRename, 1, EXDEV);
  const absl::Status s = env.WriteFileAtomically(dir + "/f", "bytes");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot rename into " + dir + "/f"), std::string::npos) << s;
  EXPECT_TRUE(Sorted(env.ListDirectory(dir)).empty());
}

TEST(FakeEnvTest, InjectedMemfdAndRemoveFaultsCountDown) {
  FakeEnv env;
  env.FailNext(FakeEnv::Op::kMemfd, 2, EMFILE);
  for (int i = 0; i < 2; ++i) {
    const absl::Status s = env.CreateMemfd("ring").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
    EXPECT_NE(s.message().find("memfd_create(ring)"), std::string::npos) << s;
  }
  absl::StatusOr<int> fd = env.CreateMemfd("ring");
  ASSERT_TRUE(fd.ok()) << fd.status();
  ::close(*fd);
  EXPECT_EQ(env.faults_fired(FakeEnv::Op::kMemfd), 2);

  const std::string dir = testing::MakeTempDir("fake_env");
  ASSERT_TRUE(env.WriteFileAtomically(dir + "/x", "1").ok());
  env.FailNext(FakeEnv::Op::kRemove, 1, EACCES);
  EXPECT_TRUE(absl::IsPermissionDenied(env.RemoveFile(dir + "/x")));
  EXPECT_TRUE(env.RemoveFile(dir + "/x").ok());
}

TEST(FakeEnvTest, InjectedReadListAndStatFaultsNameThePathAndCountDown) {
  FakeEnv env;
  const std::string dir = testing::MakeTempDir("fake_env_read");
  const std::string path = dir + "/obj";
  ASSERT_TRUE(env.WriteFileAtomically(path, "bytes").ok());
  absl::StatusOr<std::unique_ptr<ReadableFile>> file = env.OpenForRead(path);
  ASSERT_TRUE(file.ok()) << file.status();

  env.FailNext(FakeEnv::Op::kRead, 2, EIO);
  const absl::Status read = (*file)->ReadAt(0, 5).status();
  EXPECT_EQ(read.code(), absl::StatusCode::kUnknown) << read;  // EIO, as absl maps it
  EXPECT_NE(read.message().find("cannot read " + path), std::string::npos) << read;
  EXPECT_EQ(env.ReadFile(path).status().code(), absl::StatusCode::kUnknown);
  EXPECT_EQ(env.faults_fired(FakeEnv::Op::kRead), 2);
  EXPECT_EQ(*(*file)->ReadAt(0, 5), "bytes");  // spent
  EXPECT_EQ((*file)->Stat()->size, 5u);         // a read fault leaves Stat alone

  env.FailNext(FakeEnv::Op::kList, 1, EACCES);
  const absl::Status listed = env.ListDirectory(dir).status();
  EXPECT_TRUE(absl::IsPermissionDenied(listed)) << listed;
  EXPECT_NE(listed.message().find(dir), std::string::npos) << listed;
  EXPECT_EQ(Sorted(env.ListDirectory(dir)), std::vector<std::string>{"obj"});

  env.FailNext(FakeEnv::Op::kStat, 1, EACCES);
  const absl::Status stat = env.Stat(path).status();
  EXPECT_TRUE(absl::IsPermissionDenied(stat)) << stat;
  EXPECT_NE(stat.message().find("cannot stat " + path), std::string::npos) << stat;
  EXPECT_TRUE(env.Stat(path).ok());
}

}  // namespace
}  // namespace zephon
