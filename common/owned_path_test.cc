#include "common/owned_path.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>

#include <gtest/gtest.h>

#include "common/temp_dir_testing.h"

namespace zephon {
namespace {

struct stat Dir(uid_t owner, mode_t mode) {
  struct stat st{};
  st.st_mode = S_IFDIR | mode;
  st.st_uid = owner;
  return st;
}

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

constexpr uid_t kDaemon = 0;
constexpr uid_t kOther = 1000;

TEST(CheckPrivateDirStat, AcceptsOwnedDirClosedToOthers) {
  EXPECT_TRUE(CheckPrivateDirStat("/run/zephon", Dir(kDaemon, 0700), kDaemon).ok());
  // --shm-group: members may search and list, never write.
  EXPECT_TRUE(CheckPrivateDirStat("/run/zephon", Dir(kDaemon, 0750), kDaemon).ok());
  EXPECT_TRUE(CheckPrivateDirStat("/run/zephon", Dir(kDaemon, 0755), kDaemon).ok());
}

TEST(CheckPrivateDirStat, RefusesDirOwnedByAnotherUidNamingItAndTheFix) {
  const absl::Status s = CheckPrivateDirStat("/tmp/zephon-0", Dir(kOther, 0700), kDaemon);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("/tmp/zephon-0"), std::string::npos) << s;
  EXPECT_NE(s.message().find("owned by uid 1000"), std::string::npos) << s;
  EXPECT_NE(s.message().find("XDG_RUNTIME_DIR"), std::string::npos) << s;
}

TEST(CheckPrivateDirStat, RefusesGroupOrWorldWritableEvenStickyRoot) {
  for (mode_t mode : {0770, 0702, 0777, 01777}) {
    const absl::Status s = CheckPrivateDirStat("/tmp/z", Dir(kDaemon, mode), kDaemon);
    EXPECT_TRUE(absl::IsFailedPrecondition(s)) << std::oct << mode;
    EXPECT_NE(s.message().find("chmod go-w /tmp/z"), std::string::npos) << s;
  }
}

TEST(CheckPrivateDirStat, RefusesSymlinkAndNonDirectory) {
  struct stat link{};
  link.st_mode = S_IFLNK | 0777;
  EXPECT_TRUE(absl::IsFailedPrecondition(CheckPrivateDirStat("/tmp/z", link, kDaemon)));
  struct stat file{};
  file.st_mode = S_IFREG | 0600;
  EXPECT_TRUE(absl::IsFailedPrecondition(CheckPrivateDirStat("/tmp/z", file, kDaemon)));
}

TEST(CheckTrustedDirStat, AcceptsRootOrOwnDirsAndStickySharedDirs) {
  EXPECT_TRUE(CheckTrustedDirStat("/", Dir(0, 0755), kOther).ok());
  EXPECT_TRUE(CheckTrustedDirStat("/home/u", Dir(kOther, 0700), kOther).ok());
  EXPECT_TRUE(CheckTrustedDirStat("/tmp", Dir(0, 01777), kOther).ok());
}

TEST(CheckTrustedDirStat, RefusesOtherOwnersAndNonStickyWritableDirs) {
  EXPECT_TRUE(absl::IsFailedPrecondition(
      CheckTrustedDirStat("/home/mallory", Dir(kOther, 0755), kDaemon)));
  const absl::Status s = CheckTrustedDirStat("/srv/shared", Dir(0, 0777), kDaemon);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("/srv/shared"), std::string::npos) << s;
}

class OwnedPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir("owned_path");
    ASSERT_EQ(chmod(root_.c_str(), 0700), 0);
  }
  void TearDown() override { (void)!system(("rm -rf '" + root_ + "'").c_str()); }
  std::string root_;
};

TEST_F(OwnedPathTest, EnsurePrivateDirCreatesMode0700) {
  const std::string dir = root_ + "/a/zephon";
  ASSERT_TRUE(EnsurePrivateDir(dir, geteuid()).ok()) << EnsurePrivateDir(dir, geteuid());
  struct stat st;
  ASSERT_EQ(lstat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  // Idempotent on the directory it made.
  EXPECT_TRUE(EnsurePrivateDir(dir, geteuid()).ok());
}

TEST_F(OwnedPathTest, EnsurePrivateDirRefusesExistingGroupWritableDirWithoutTouchingIt) {
  const std::string dir = root_ + "/shared";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0770), 0);
  const absl::Status s = EnsurePrivateDir(dir, geteuid());
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find(dir), std::string::npos) << s;
  struct stat st;
  ASSERT_EQ(lstat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0770u);
}

TEST_F(OwnedPathTest, EnsurePrivateDirRefusesDirOfAnotherUid) {
  // The uid is a parameter: "another user's directory" without needing a second user.
  const std::string dir = root_ + "/theirs";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  const absl::Status s = EnsurePrivateDir(dir, geteuid() + 1);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("owned by uid"), std::string::npos) << s;
}

TEST_F(OwnedPathTest, EnsurePrivateDirRefusesSymlinkedDir) {
  const std::string real = root_ + "/real";
  const std::string link = root_ + "/link";
  ASSERT_EQ(mkdir(real.c_str(), 0700), 0);
  ASSERT_EQ(symlink(real.c_str(), link.c_str()), 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(EnsurePrivateDir(link, geteuid())));
}

TEST_F(OwnedPathTest, EnsurePrivateDirRefusesUntrustedAncestor) {
  const std::string open_dir = root_ + "/open";
  ASSERT_EQ(mkdir(open_dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(open_dir.c_str(), 0777), 0);  // world-writable, not sticky
  const absl::Status s = EnsurePrivateDir(open_dir + "/zephon", geteuid());
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find(open_dir), std::string::npos) << s;
  // Sticky, it is trusted (as /tmp is).
  ASSERT_EQ(chmod(open_dir.c_str(), 01777), 0);
  EXPECT_TRUE(EnsurePrivateDir(open_dir + "/zephon2", geteuid()).ok());
}

TEST_F(OwnedPathTest, OpenOwnedFileCreatesAndAppends) {
  const std::string path = root_ + "/log";
  for (const char* line : {"one\n", "two\n"}) {
    absl::StatusOr<int> fd = OpenOwnedFile(path, O_WRONLY | O_APPEND, 0600, geteuid());
    ASSERT_TRUE(fd.ok()) << fd.status();
    ASSERT_EQ(write(*fd, line, 4), 4);
    close(*fd);
  }
  EXPECT_EQ(ReadAll(path), "one\ntwo\n");
  EXPECT_EQ(fcntl(*OpenOwnedFile(path, O_WRONLY, 0600, geteuid()), F_GETFD) & FD_CLOEXEC,
            FD_CLOEXEC);
}

TEST_F(OwnedPathTest, OpenOwnedFileRefusesSymlinkAndLeavesTargetAlone) {
  const std::string target = root_ + "/root-only";
  const std::string link = root_ + "/zephond.sock.lock";
  WriteText(target, "secret\n");
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  absl::StatusOr<int> fd = OpenOwnedFile(link, O_RDWR, 0600, geteuid());
  ASSERT_TRUE(absl::IsFailedPrecondition(fd.status())) << fd.status();
  EXPECT_NE(fd.status().message().find("symlink"), std::string::npos) << fd.status();
  EXPECT_EQ(ReadAll(target), "secret\n");
}

TEST_F(OwnedPathTest, OpenOwnedFileRefusesHardLinkForeignOwnerAndFifo) {
  const std::string target = root_ + "/target";
  const std::string hard = root_ + "/hard";
  WriteText(target, "x");
  ASSERT_EQ(link(target.c_str(), hard.c_str()), 0);
  EXPECT_TRUE(absl::IsFailedPrecondition(
      OpenOwnedFile(hard, O_WRONLY | O_APPEND, 0600, geteuid()).status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(
      OpenOwnedFile(root_ + "/mine", O_WRONLY, 0600, geteuid() + 1).status()));
  const std::string fifo = root_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_FALSE(OpenOwnedFile(fifo, O_WRONLY, 0600, geteuid()).ok());  // and does not block
}

}  // namespace
}  // namespace zephon
