#include "shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "shm/test_util.h"

namespace zephon::shm {
namespace {

using ::zephon::shm::testing::UniqueShmName;

mode_t ModeOf(const std::string& name) {
  const int fd = shm_open(name.c_str(), O_RDONLY, 0);
  EXPECT_GE(fd, 0);
  struct stat st {};
  EXPECT_EQ(fstat(fd, &st), 0);
  close(fd);
  return st.st_mode & 0777;
}

TEST(SegmentTest, CreateUsesExactlyTheRequestedModeDespiteUmask) {
  const mode_t old_umask = umask(0077);
  const std::string a = UniqueShmName("mode");
  const std::string b = UniqueShmName("mode");
  auto sa = Segment::Create(a, 8192, 0600);
  auto sb = Segment::Create(b, 8192, 0660);
  umask(old_umask);
  ASSERT_TRUE(sa.ok()) << sa.status();
  ASSERT_TRUE(sb.ok()) << sb.status();
  EXPECT_EQ(ModeOf(a), 0600u);
  EXPECT_EQ(ModeOf(b), 0660u);  // umask 077 would have stripped the group bits
  EXPECT_TRUE(Segment::Unlink(a).ok());
  EXPECT_TRUE(Segment::Unlink(b).ok());
}

TEST(SegmentTest, CreateIsExclusive) {
  const std::string name = UniqueShmName("excl");
  auto first = Segment::Create(name, 4096, 0600);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = Segment::Create(name, 4096, 0600);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(Segment::Unlink(name).ok());
}

TEST(SegmentTest, OpenSharesBytesAndTakesSizeFromFstat) {
  const std::string name = UniqueShmName("open");
  auto created = Segment::Create(name, 3 * 4096, 0600);
  ASSERT_TRUE(created.ok()) << created.status();
  std::memcpy((*created)->data() + 5000, "hello", 5);
  auto opened = Segment::Open(name);
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ((*opened)->size(), 3u * 4096);
  EXPECT_EQ(std::memcmp((*opened)->data() + 5000, "hello", 5), 0);
  EXPECT_TRUE(Segment::Unlink(name).ok());
  // The mappings outlive the name.
  (*opened)->data()[0] = 7;
  EXPECT_EQ((*created)->data()[0], 7);
  EXPECT_EQ(Segment::Open(name).status().code(), absl::StatusCode::kNotFound);
}

TEST(SegmentTest, BadNamesAreRejected) {
  for (const std::string name : {"", "/", "noslash", "/a/b"}) {
    EXPECT_EQ(Segment::Create(name, 4096, 0600).status().code(),
              absl::StatusCode::kInvalidArgument)
        << name;
    EXPECT_EQ(Segment::Open(name).status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(Segment::Create(UniqueShmName("zero"), 0, 0600).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SegmentTest, CreateFailsCleanlyWhenFreeSpaceIsShort) {
  const std::string name = UniqueShmName("nospace");
  SegmentOptions options;
  options.free_bytes_limit = 1 << 20;
  auto segment = Segment::Create(name, 4 << 20, 0600, options);
  ASSERT_EQ(segment.status().code(), absl::StatusCode::kResourceExhausted);
  const std::string msg(segment.status().message());
  EXPECT_NE(msg.find("4194304 bytes"), std::string::npos) << msg;  // needed
  EXPECT_NE(msg.find("1048576 bytes"), std::string::npos) << msg;  // free
  EXPECT_NE(msg.find("--shm-size"), std::string::npos) << msg;
  EXPECT_NE(msg.find("emptyDir"), std::string::npos) << msg;
  EXPECT_NE(msg.find("medium: Memory"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sizeLimit"), std::string::npos) << msg;
  EXPECT_EQ(Segment::Open(name).status().code(), absl::StatusCode::kNotFound);
}

TEST(SegmentTest, CreateFailsWhenShmDirIsMissing) {
  SegmentOptions options;
  options.shm_dir = "/nonexistent-zephon-dir";
  EXPECT_EQ(Segment::Create(UniqueShmName("nodir"), 4096, 0600, options).status().code(),
            absl::StatusCode::kNotFound);
}

TEST(SegmentTest, SweepPrefixRemovesOnlyMatchingSegments) {
  const std::string prefix = "zephon-sweep." + std::to_string(getpid()) + ".";
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(Segment::Create("/" + prefix + std::to_string(i), 4096, 0600).ok());
  }
  const std::string other = UniqueShmName("keep");
  ASSERT_TRUE(Segment::Create(other, 4096, 0600).ok());
  auto removed = Segment::SweepPrefix("/" + prefix);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 3);
  EXPECT_EQ(Segment::Open("/" + prefix + "0").status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Segment::Open(other).ok());
  EXPECT_TRUE(Segment::Unlink(other).ok());
}

TEST(SegmentTest, SweepPrefixHonoursAnInjectedDirectory) {
  char dir_template[] = "/tmp/zephon-shmdir.XXXXXX";
  ASSERT_NE(mkdtemp(dir_template), nullptr);
  const std::string dir = dir_template;
  std::ofstream(dir + "/zephon.a") << "x";
  std::ofstream(dir + "/zephon.b") << "x";
  std::ofstream(dir + "/other") << "x";
  auto removed = Segment::SweepPrefix("zephon.", dir);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_EQ(access((dir + "/other").c_str(), F_OK), 0);
  unlink((dir + "/other").c_str());
  rmdir(dir.c_str());
  EXPECT_EQ(Segment::SweepPrefix("", dir).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zephon::shm
