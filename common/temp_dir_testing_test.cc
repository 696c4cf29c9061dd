#include "common/temp_dir_testing.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <fstream>
#include <stdexcept>
#include <string>

#include "gtest/gtest.h"

namespace zephon::testing {
namespace {

bool IsDirectory(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

TEST(MakeTempDirTest, MakesAFreshDirectoryPerCall) {
  const std::string a = MakeTempDir("tdt");
  const std::string b = MakeTempDir("tdt");
  EXPECT_NE(a, b);
  EXPECT_TRUE(IsDirectory(a));
  EXPECT_TRUE(IsDirectory(b));
}

TEST(MakeShortTempDirTest, IsUnderTmpAndRemovedWithItsContents) {
  std::string path;
  {
    const ShortTempDir dir = MakeShortTempDir("tdt");
    path = dir.path();
    EXPECT_EQ(path.rfind("/tmp/zephon-tdt-", 0), 0u) << path;
    ASSERT_TRUE(IsDirectory(path));
    ASSERT_EQ(::mkdir((path + "/sub").c_str(), 0700), 0);
    std::ofstream(path + "/sub/file") << "x";
  }
  EXPECT_FALSE(IsDirectory(path));
}

TEST(MakeShortTempDirTest, ASocketBindsInsideItWithTheLongestTag) {
  const ShortTempDir dir = MakeShortTempDir(std::string(kMaxShortTempDirTag, 's'));
  const std::string socket_path = dir.path() + "/a-socket-name-of-forty-characters.sock";
  sockaddr_un addr{};
  ASSERT_LT(socket_path.size(), sizeof(addr.sun_path)) << socket_path;
  addr.sun_family = AF_UNIX;
  socket_path.copy(addr.sun_path, socket_path.size());
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0);
  ::close(fd);
}

TEST(MakeShortTempDirTest, AMoveHandsOverTheDirectoryOnce) {
  ShortTempDir first = MakeShortTempDir("tdt");
  const std::string path = first.path();
  ShortTempDir second = std::move(first);
  EXPECT_EQ(first.path(), "");  // NOLINT(bugprone-use-after-move): moved-from is empty
  EXPECT_EQ(second.path(), path);
  EXPECT_TRUE(IsDirectory(path));
}

TEST(MakeShortTempDirTest, ALongOrNestedTagIsRefusedNamingTheFix) {
  try {
    MakeShortTempDir(std::string(kMaxShortTempDirTag + 1, 'x'));
    FAIL() << "a long tag was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("use a shorter tag"), std::string::npos) << e.what();
  }
  EXPECT_THROW(MakeShortTempDir("a/b"), std::invalid_argument);
}

}  // namespace
}  // namespace zephon::testing
