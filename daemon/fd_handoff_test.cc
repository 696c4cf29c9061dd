#include "daemon/fd_handoff.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/fake_env.h"
#include "common/temp_dir_testing.h"
#include "gtest/gtest.h"
#include "shm/fd_passing.h"
#include "shm/segment.h"

// Counts umask() calls made from this binary (the definition here takes precedence over
// libc's for the code linked into the test): umask is process-wide, so a library that
// changes it races with every other thread creating files.
std::atomic<int> g_umask_calls{0};
extern "C" mode_t umask(mode_t mask) noexcept {
  g_umask_calls.fetch_add(1);
  return static_cast<mode_t>(syscall(SYS_umask, mask));
}

namespace zephon::daemon {
namespace {

constexpr absl::Duration kWait = absl::Seconds(5);

class FdHandoffTest : public ::testing::Test {
 protected:
  void Start(absl::Duration ttl = absl::Seconds(30),
             absl::Duration io_timeout = absl::Seconds(2), Env* env = Env::Default()) {
    FdHandoffOptions options;
    options.env = env;
    options.socket_path = socket_dir_.path() + "/handoff.fds";
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

  // Declared first, so removed after the hand-off stopped serving in it.
  const testing::ShortTempDir socket_dir_ = testing::MakeShortTempDir("handoff");
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

TEST_F(FdHandoffTest, TokenExpiryIsDecidedByTheEnvClock) {
  FakeEnv env;
  Start(/*ttl=*/absl::Seconds(60), absl::Seconds(2), &env);
  const std::string kept = Offer();
  env.Advance(absl::Seconds(59));
  EXPECT_TRUE(Claim(kept).ok());  // 59 s of its 60 s on the env's clock: still valid
  const std::string lapsed = Offer();
  env.Advance(absl::Seconds(61));
  const absl::Status status = Claim(lapsed).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_EQ(handoff_->pending(), 0u);
  handoff_.reset();  // its serving thread reads `env`'s clock: stop it before `env` dies
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

// Connects to `path` and sends nothing.
int ConnectSilently(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0)
      << std::strerror(errno);
  return fd;
}

TEST_F(FdHandoffTest, SilentClientsDoNotDelayARealClaim) {
  // Each silent peer used to hold the single serving thread for a whole io_timeout, so
  // eight of them delayed the claim 16 s: past the claim's own deadline below, and with a
  // full backlog past the token's lifetime.
  Start(absl::Seconds(30), /*io_timeout=*/absl::Seconds(2));
  std::vector<int> silent;
  for (int i = 0; i < 8; ++i) silent.push_back(ConnectSilently(handoff_->socket_path()));
  absl::SleepFor(absl::Milliseconds(50));  // let the daemon accept them first
  const std::string token = Offer();
  const absl::Time start = absl::Now();
  auto fds = shm::ClaimRingFds(handoff_->socket_path(), token, start + absl::Seconds(5));
  ASSERT_TRUE(fds.ok()) << fds.status();
  // A deadline check, not a benchmark: well within one io_timeout, let alone 8 of them.
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  // The silent peers are not served forever either: each is closed after io_timeout.
  for (int fd : silent) {
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 10000), 1);
    char byte;
    EXPECT_EQ(recv(fd, &byte, 1, MSG_DONTWAIT), 0);  // end of stream: the daemon closed it
    close(fd);
  }
}

TEST_F(FdHandoffTest, AcceptOutOfDescriptorsBacksOffInsteadOfSpinning) {
  // In a child process: its descriptor table is filled so the serving thread's accept4
  // fails with EMFILE while a connection waits; the thread must not spin a core on it.
  const std::string path = socket_dir_.path() + "/emfile.fds";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    FdHandoffOptions options;
    options.socket_path = path;
    auto handoff = FdHandoff::Start(options);
    if (!handoff.ok()) _exit(2);
    const int client = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    const rlimit limit{128, 128};
    if (client < 0 || setrlimit(RLIMIT_NOFILE, &limit) != 0) _exit(3);
    while (dup(client) >= 0) {
    }
    if (errno != EMFILE) _exit(4);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) _exit(5);
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    absl::SleepFor(absl::Seconds(2));
    getrusage(RUSAGE_SELF, &after);
    const auto cpu_us = [](const rusage& r) {
      return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1000000L + r.ru_utime.tv_usec +
             r.ru_stime.tv_usec;
    };
    const long used_us = cpu_us(after) - cpu_us(before);
    std::fprintf(stderr, "CPU used in 2 s out of descriptors: %ld us\n", used_us);
    // A spinning loop burns ~2 s (or whatever share of a busy core it gets); backing
    // off burns a few ms.
    _exit(used_us < 250000 ? 0 : 6);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST_F(FdHandoffTest, StartLeavesTheUmaskAloneAndStillMakesTheSocketOwnerOnly) {
  // A permissive umask must not widen the socket, and Start must not touch the umask.
  const mode_t saved = static_cast<mode_t>(syscall(SYS_umask, 0));
  const int calls_before = g_umask_calls.load();
  Start();
  const int calls = g_umask_calls.load() - calls_before;
  syscall(SYS_umask, saved);
  EXPECT_EQ(calls, 0) << "FdHandoff::Start changed the process-wide umask";
  struct stat st {};
  ASSERT_EQ(stat(handoff_->socket_path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(Claim(Offer()).ok());
}

TEST_F(FdHandoffTest, PeerOfAnotherUserIsRefused) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a peer as another uid";
  Start();
  const std::string token = Offer();
  // Open the file mode (and let the peer through the 0700 scratch directory) so the
  // peer-credential check is what refuses it.
  ASSERT_EQ(chmod(socket_dir_.path().c_str(), 0711), 0);
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
