#include "daemon/fd_handoff.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "shm/fd_passing.h"
#include "shm/segment.h"

namespace zephon::daemon {
namespace {

constexpr absl::Duration kWait = absl::Seconds(5);

std::string TempSocketPath() {
  static int n = 0;
  return absl::StrCat("/tmp/zephon-handoff-test.", getpid(), ".", n++, ".fds");
}

class FdHandoffTest : public ::testing::Test {
 protected:
  void Start(absl::Duration ttl = absl::Seconds(30),
             absl::Duration io_timeout = absl::Seconds(2)) {
    FdHandoffOptions options;
    options.socket_path = TempSocketPath();
    options.token_ttl = ttl;
    options.io_timeout = io_timeout;
    auto handoff = FdHandoff::Start(options);
    ASSERT_TRUE(handoff.ok()) << handoff.status();
    handoff_ = *std::move(handoff);
    auto segment = shm::Segment::Create(absl::StrCat("handoff-test.", getpid()), 8192);
    ASSERT_TRUE(segment.ok()) << segment.status();
    segment_ = *std::move(segment);
  }

  // Offers a read-only fd and a dup of the test segment.
  std::string Offer() {
    shm::RingFds fds{*segment_->OpenReadOnly(), *segment_->Dup()};
    auto token = handoff_->Offer(std::move(fds), "test reader");
    EXPECT_TRUE(token.ok()) << token.status();
    return token.ok() ? *token : "";
  }

  absl::StatusOr<shm::RingFds> Claim(const std::string& token) {
    return shm::ClaimRingFds(handoff_->socket_path(), token, absl::Now() + kWait);
  }

  std::unique_ptr<FdHandoff> handoff_;
  std::unique_ptr<shm::Segment> segment_;
};

TEST_F(FdHandoffTest, TokenClaimsTheRingDescriptorsExactlyOnce) {
  Start();
  const std::string token = Offer();
  EXPECT_EQ(token.size(), 32u);
  EXPECT_EQ(handoff_->pending(), 1u);
  auto fds = Claim(token);
  ASSERT_TRUE(fds.ok()) << fds.status();
  struct stat mine {}, got {};
  ASSERT_EQ(fstat(segment_->fd(), &mine), 0);
  ASSERT_EQ(fstat(fds->data.get(), &got), 0);
  EXPECT_EQ(mine.st_ino, got.st_ino);
  EXPECT_EQ(fcntl(fds->data.get(), F_GETFL) & O_ACCMODE, O_RDONLY);
  EXPECT_EQ(fcntl(fds->cursors.get(), F_GETFL) & O_ACCMODE, O_RDWR);
  EXPECT_EQ(handoff_->pending(), 0u);
  auto again = Claim(token);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kNotFound) << again.status();
}

TEST_F(FdHandoffTest, UnknownWithdrawnAndExpiredTokensAreNotFound) {
  Start(/*ttl=*/absl::Milliseconds(200));
  EXPECT_EQ(Claim("0123456789abcdef0123456789abcdef").status().code(),
            absl::StatusCode::kNotFound);
  const std::string withdrawn = Offer();
  handoff_->Withdraw(withdrawn);
  EXPECT_EQ(Claim(withdrawn).status().code(), absl::StatusCode::kNotFound);
  const std::string expired = Offer();
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_EQ(handoff_->pending(), 0u);  // the serving loop expired it on its own
  auto status = Claim(expired).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_NE(status.message().find("expired"), std::string::npos) << status;
}

TEST_F(FdHandoffTest, SocketIsOwnerOnlyAndRemovedOnShutdown) {
  Start();
  const std::string path = handoff_->socket_path();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  handoff_.reset();
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

TEST_F(FdHandoffTest, SilentClientDelaysOthersAtMostOneIoTimeout) {
  Start(absl::Seconds(30), /*io_timeout=*/absl::Milliseconds(300));
  // Connect and never send: the daemon must give up on it and serve the next client.
  const int silent = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, handoff_->socket_path().c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(connect(silent, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string token = Offer();
  auto fds = Claim(token);
  EXPECT_TRUE(fds.ok()) << fds.status();
  close(silent);
}

TEST_F(FdHandoffTest, PeerOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a peer as another uid";
  Start();
  const std::string token = Offer();
  // Open the file mode so the peer-credential check is what refuses it.
  ASSERT_EQ(chmod(handoff_->socket_path().c_str(), 0666), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (setgid(65534) != 0 || setuid(65534) != 0) _exit(2);
    auto fds = shm::ClaimRingFds(handoff_->socket_path(), token, absl::Now() + kWait);
    if (fds.ok()) _exit(3);
    if (fds.status().code() != absl::StatusCode::kPermissionDenied) {
      std::fprintf(stderr, "peer got %s\n", fds.status().ToString().c_str());
      _exit(4);
    }
    if (fds.status().message().find("--shm-group") == std::string::npos) _exit(5);
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  // The refused peer did not consume the token.
  EXPECT_TRUE(Claim(token).ok());
}

}  // namespace
}  // namespace zephon::daemon
