#include "shm/segment.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/fake_env.h"
#include "common/temp_dir_testing.h"
#include "gtest/gtest.h"
#include "shm/test_util.h"

namespace zephon::shm {
namespace {

using ::zephon::shm::testing::UniqueShmName;
using ::zephon::testing::MakeShortTempDir;
using ::zephon::testing::ShortTempDir;

// memfd names carry no leading slash.
std::string UniqueMemfdName(const std::string& tag) { return UniqueShmName(tag).substr(1); }

std::unique_ptr<Segment> MustCreate(uint64_t bytes) {
  auto segment = Segment::Create(UniqueMemfdName("seg"), bytes);
  EXPECT_TRUE(segment.ok()) << segment.status();
  return segment.ok() ? *std::move(segment) : nullptr;
}

TEST(SegmentTest, CreateIsOwnerOnlyAndSizedExactly) {
  auto segment = MustCreate(3 * 4096);
  ASSERT_NE(segment, nullptr);
  struct stat st {};
  ASSERT_EQ(fstat(segment->fd(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 3 * 4096);
  EXPECT_EQ(segment->size(), 3u * 4096);
}

TEST(SegmentTest, CreateLeavesNothingInDevShm) {
  const std::string name = UniqueMemfdName("anon");
  auto segment = Segment::Create(name, 4096);
  ASSERT_TRUE(segment.ok()) << segment.status();
  EXPECT_NE(access(absl::StrCat("/dev/shm/", name).c_str(), F_OK), 0);
}

TEST(SegmentTest, CreateRejectsBadNamesAndZeroSize) {
  EXPECT_EQ(Segment::Create("", 4096).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Segment::Create("a/b", 4096).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Segment::Create(std::string(250, 'x'), 4096).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Segment::Create("zero", 0).status().code(), absl::StatusCode::kInvalidArgument);
}

// Issue 12: a reader truncating a live ring killed zephond and every reader with SIGBUS.
TEST(SegmentTest, NoHolderCanShrinkOrGrowTheSegment) {
  auto segment = MustCreate(4 * 4096);
  ASSERT_NE(segment, nullptr);
  auto rw = segment->Dup();
  ASSERT_TRUE(rw.ok()) << rw.status();
  errno = 0;
  EXPECT_NE(ftruncate(rw->get(), 4096), 0);
  EXPECT_EQ(errno, EPERM);
  EXPECT_NE(ftruncate(rw->get(), 8 * 4096), 0);
  EXPECT_EQ(errno, EPERM);
  // The seals cannot be removed, and the pages stay: touching the last byte is fine.
  EXPECT_NE(fcntl(rw->get(), F_GET_SEALS) & F_SEAL_SHRINK, 0);
  segment->data()[segment->size() - 1] = 1;
  EXPECT_EQ(segment->data()[segment->size() - 1], 1);
}

TEST(SegmentTest, ReadOnlyFdCannotTruncateOrMapWritable) {
  auto segment = MustCreate(2 * 4096);
  ASSERT_NE(segment, nullptr);
  auto ro = segment->OpenReadOnly();
  ASSERT_TRUE(ro.ok()) << ro.status();
  EXPECT_EQ(fcntl(ro->get(), F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_NE(ftruncate(ro->get(), 0), 0);
  EXPECT_TRUE(errno == EINVAL || errno == EBADF || errno == EPERM) << std::strerror(errno);
  EXPECT_EQ(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, ro->get(), 0), MAP_FAILED);
  void* view = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, ro->get(), 0);
  ASSERT_NE(view, MAP_FAILED);
  EXPECT_NE(mprotect(view, 4096, PROT_READ | PROT_WRITE), 0);
  EXPECT_EQ(errno, EACCES);
  munmap(view, 4096);
}

TEST(SegmentTest, SealedAgainstNewWritersEvenThroughProcReopen) {
  auto segment = MustCreate(2 * 4096);
  ASSERT_NE(segment, nullptr);
  ASSERT_TRUE(segment->Seal(/*forbid_new_writers=*/true).ok());
  // A process of the creator's uid may reopen its fd read-write through /proc; the
  // future-write seal still forbids a writable mapping and write(2).
  const std::string path = absl::StrCat("/proc/self/fd/", segment->fd());
  const int rw = open(path.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(rw, 0) << std::strerror(errno);
  EXPECT_EQ(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, rw, 0), MAP_FAILED);
  EXPECT_EQ(errno, EPERM);
  EXPECT_EQ(write(rw, "x", 1), -1);
  EXPECT_EQ(ftruncate(rw, 0), -1);
  close(rw);
  // The creator's own mapping still writes.
  segment->data()[0] = 42;
  EXPECT_EQ(segment->data()[0], 42);
  // F_SEAL_SEAL: nobody can add or change seals any more.
  EXPECT_NE(fcntl(segment->fd(), F_ADD_SEALS, F_SEAL_WRITE), 0);
}

TEST(SegmentTest, MapSharesMemoryWithTheCreator) {
  auto segment = MustCreate(2 * 4096);
  ASSERT_NE(segment, nullptr);
  auto ro = segment->OpenReadOnly();
  ASSERT_TRUE(ro.ok());
  auto view = Segment::Map(*std::move(ro), "view", Access::kReadOnly);
  ASSERT_TRUE(view.ok()) << view.status();
  EXPECT_EQ((*view)->size(), segment->size());
  segment->data()[4097] = 7;
  EXPECT_EQ((*view)->data()[4097], 7);
}

TEST(SegmentTest, MapRefusesWritableMappingOfReadOnlyFd) {
  auto segment = MustCreate(4096);
  ASSERT_NE(segment, nullptr);
  auto ro = segment->OpenReadOnly();
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ(Segment::Map(*std::move(ro), "x", Access::kReadWrite).status().code(),
            absl::StatusCode::kPermissionDenied);
}

TEST(SegmentTest, MapRefusesAnUnsealedFile) {
  // A shrinkable file could be truncated under the mapping: SIGBUS. Refuse it.
  const int fd = memfd_create("unsealed", MFD_CLOEXEC);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 4096), 0);
  auto mapped = Segment::Map(UniqueFd(fd), "unsealed", Access::kReadOnly);
  ASSERT_EQ(mapped.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(mapped.status().message().find("not sealed against shrinking"), std::string::npos)
      << mapped.status();
  char path[] = "/tmp/zephon-plain.XXXXXX";
  const int plain = mkstemp(path);
  ASSERT_GE(plain, 0);
  unlink(path);
  ASSERT_EQ(ftruncate(plain, 4096), 0);
  EXPECT_EQ(Segment::Map(UniqueFd(plain), "plain", Access::kReadOnly).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(SegmentTest, SweepPrefixRemovesOnlyMatchingLegacySegments) {
  const std::string prefix = "zephon-sweep." + std::to_string(getpid()) + ".";
  for (int i = 0; i < 3; ++i) {
    const int fd = shm_open(("/" + prefix + std::to_string(i)).c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    close(fd);
  }
  const std::string other = UniqueShmName("keep");
  const int fd = shm_open(other.c_str(), O_CREAT | O_RDWR, 0600);
  ASSERT_GE(fd, 0);
  close(fd);
  auto removed = Segment::SweepPrefix("/" + prefix);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 3);
  EXPECT_NE(access(("/dev/shm/" + prefix + "0").c_str(), F_OK), 0);
  EXPECT_EQ(shm_unlink(other.c_str()), 0);
}

// A scratch stand-in for /dev/shm holding legacy segments zephon.a and zephon.b, removed
// when the test ends.
ShortTempDir LegacyShmDir() {
  ShortTempDir dir = MakeShortTempDir("shmdir");
  std::ofstream(dir.path() + "/zephon.a") << "x";
  std::ofstream(dir.path() + "/zephon.b") << "x";
  return dir;
}

TEST(SegmentTest, SweepPrefixHonoursAnInjectedDirectory) {
  const ShortTempDir scratch = LegacyShmDir();
  const std::string& dir = scratch.path();
  std::ofstream(dir + "/other") << "x";
  auto removed = Segment::SweepPrefix("zephon.", dir);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 2);
  EXPECT_EQ(access((dir + "/other").c_str(), F_OK), 0);
  EXPECT_EQ(Segment::SweepPrefix("", dir).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(SegmentTest, SweepPrefixCountsOnlyWhatItRemoved) {
  const ShortTempDir scratch = LegacyShmDir();
  const std::string& dir = scratch.path();
  FakeEnv env;
  env.FailNext(FakeEnv::Op::kRemove, 1, EACCES);  // e.g. another user's legacy segment
  auto removed = Segment::SweepPrefix("zephon.", dir, &env);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(*removed, 1);
  EXPECT_EQ(env.faults_fired(FakeEnv::Op::kRemove), 1);
  EXPECT_EQ(*Segment::SweepPrefix("zephon.", dir, &env), 1);  // the one left behind
}

}  // namespace
}  // namespace zephon::shm
