#include "shm/fd_passing.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace zephon::shm {
namespace {

constexpr absl::Duration kShort = absl::Milliseconds(200);

class FdPassingTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair_), 0); }
  void TearDown() override {
    close(pair_[0]);
    close(pair_[1]);
  }
  int pair_[2] = {-1, -1};
};

TEST_F(FdPassingTest, DescriptorsArriveAsTheSameOpenFiles) {
  auto segment = Segment::Create("fd-passing-test", 4096);
  ASSERT_TRUE(segment.ok());
  const int fds[] = {(*segment)->fd(), STDIN_FILENO};
  ASSERT_TRUE(SendWithFds(pair_[0], "hello", fds, absl::Now() + kShort).ok());
  auto got = ReceiveWithFds(pair_[1], 64, 2, absl::Now() + kShort);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bytes, "hello");
  ASSERT_EQ(got->fds.size(), 2u);
  struct stat a {}, b {};
  ASSERT_EQ(fstat((*segment)->fd(), &a), 0);
  ASSERT_EQ(fstat(got->fds[0].get(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_EQ(a.st_dev, b.st_dev);
  EXPECT_NE(fcntl(got->fds[0].get(), F_GETFD) & FD_CLOEXEC, 0);  // no leak into exec'd children
}

TEST_F(FdPassingTest, ReceiveHonoursItsDeadline) {
  const absl::Time start = absl::Now();
  auto got = ReceiveWithFds(pair_[1], 64, 2, absl::Now() + kShort);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDeadlineExceeded) << got.status();
  EXPECT_GE(absl::Now() - start, kShort);
}

TEST_F(FdPassingTest, PeerClosingIsUnavailable) {
  close(pair_[0]);
  pair_[0] = -1;
  auto got = ReceiveWithFds(pair_[1], 64, 2, absl::Now() + kShort);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
}

TEST_F(FdPassingTest, TooManyDescriptorsOrBytesAreRefusedAndClosed) {
  const int fds[] = {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO};
  ASSERT_TRUE(SendWithFds(pair_[0], "x", fds, absl::Now() + kShort).ok());
  EXPECT_EQ(ReceiveWithFds(pair_[1], 64, 2, absl::Now() + kShort).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(SendWithFds(pair_[0], std::string(100, 'y'), {}, absl::Now() + kShort).ok());
  EXPECT_EQ(ReceiveWithFds(pair_[1], 64, 2, absl::Now() + kShort).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ClaimRingFdsTest, NoListenerIsUnavailableNamingThePath) {
  const std::string path = "/tmp/zephon-no-such-handoff-" + std::to_string(getpid()) + ".fds";
  auto got = ClaimRingFds(path, "token", absl::Now() + kShort);
  ASSERT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_NE(got.status().message().find(path), std::string::npos);
}

TEST(ClaimRingFdsTest, RejectsEmptyOrHugeTokens) {
  EXPECT_EQ(ClaimRingFds("/tmp/x.fds", "", absl::Now() + kShort).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ClaimRingFds("/tmp/x.fds", std::string(kMaxTokenBytes + 1, 't'),
                         absl::Now() + kShort)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zephon::shm
