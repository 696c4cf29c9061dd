#include "client/connection.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/owned_path.h"
#include "common/paths.h"
#include "common/rpc_limits.h"

extern char** environ;

namespace zephon::client {
namespace {

bool Answers(const std::shared_ptr<grpc::Channel>& channel, absl::Duration wait) {
  return channel->WaitForConnected(absl::ToChronoTime(absl::Now() + wait));
}

// What a plain connect() to the socket finds. It costs microseconds and leaves the gRPC
// channel untouched: a gRPC attempt against a missing socket would put the channel into
// reconnect backoff (50 ms and more) and so delay the first batch of an auto-started
// daemon by that much.
enum class Listener {
  kPresent,  // something accepts connections, or its backlog is full: ask it over gRPC
  kAbsent,   // no socket file, or nobody listens on it (a daemon that died)
  kUnknown,  // cannot tell (permissions, a path too long): let gRPC try
};

// Sleeps `*poll`, then doubles it up to 20 ms: a daemon that comes up within a few
// milliseconds is seen at once, and one that takes longer is not spun on.
void SleepAndBackOff(absl::Duration* poll) {
  absl::SleepFor(*poll);
  *poll = std::min(*poll * 2, absl::Milliseconds(20));
}

Listener ProbeListener(const std::string& path) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return Listener::kUnknown;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  // Non-blocking: a blocking connect() to a listener whose backlog is full (a wedged
  // daemon) would wait without a deadline; this one fails with EAGAIN at once instead.
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return Listener::kUnknown;
  const int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int err = rc == 0 ? 0 : errno;
  close(fd);
  if (rc == 0 || err == EAGAIN) return Listener::kPresent;
  if (err == ENOENT || err == ECONNREFUSED) return Listener::kAbsent;
  return Listener::kUnknown;
}

// Starts `zephond` through `sh -c '... &'` in a new session so it is reparented to init
// at once: no zombie in the trainer, no controlling terminal, no inherited signals. Its
// output goes to "<socket>.log", opened here without following symlinks (a shell's `>>`
// would append through one planted at that path) and handed over as stdout and stderr.
// Returns the daemon's pid (the shell prints it on a pipe), or 0 where it is not known.
absl::StatusOr<pid_t> SpawnDaemon(const std::string& zephond, const std::string& socket,
                                  double idle_exit_s) {
  struct stat st;
  if (stat(zephond.c_str(), &st) != 0 || !(st.st_mode & S_IXUSR)) {
    return absl::NotFoundError(absl::StrCat("cannot start zephond: '", zephond,
                                            "' is not an executable file (run `make build`, or "
                                            "set ZEPHOND to the binary)"));
  }
  const std::string log = socket + ".log";
  absl::StatusOr<int> log_fd = OpenOwnedFile(log, O_WRONLY | O_APPEND, 0600, geteuid());
  if (!log_fd.ok()) {
    return absl::Status(log_fd.status().code(), absl::StrCat("cannot start zephond: its log ",
                                                             log_fd.status().message()));
  }
  int pid_pipe[2];
  if (pipe2(pid_pipe, O_CLOEXEC) != 0) {
    const int err = errno;
    close(*log_fd);
    return absl::InternalError(absl::StrCat("cannot start zephond: pipe: ", std::strerror(err)));
  }
  const std::string idle = absl::StrCat(idle_exit_s);
  // An auto-started daemon serves this node's ranks only: no TCP port at all (no peer
  // service, no metrics endpoint); multi-node runs use an operator-run zephond. The
  // shell's stdout is the pid pipe; the daemon's stdout and stderr are the log.
  std::vector<std::string> args = {"/bin/sh", "-c", "\"$0\" \"$@\" </dev/null >&2 & echo $!",
                                   zephond, "--socket", socket, "--idle-exit-s", idle,
                                   "--metrics-address", ""};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, pid_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&files, *log_fd, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  pid_t shell = 0;
  const int rc = posix_spawn(&shell, "/bin/sh", &files, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&files);
  close(*log_fd);
  close(pid_pipe[1]);
  if (rc != 0) {
    close(pid_pipe[0]);
    return absl::InternalError(absl::StrCat("cannot start zephond: ", std::strerror(rc)));
  }
  int status = 0;
  while (waitpid(shell, &status, 0) < 0 && errno == EINTR) {
  }
  // The shell has exited and the daemon's stdout is the log, so the pipe is at its end:
  // this read does not wait (the poll bounds it all the same).
  char text[32] = {};
  size_t got = 0;
  pollfd readable{pid_pipe[0], POLLIN, 0};
  while (got + 1 < sizeof(text) && poll(&readable, 1, 1000) == 1) {
    const ssize_t n = read(pid_pipe[0], text + got, sizeof(text) - 1 - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(pid_pipe[0]);
  const long pid = std::strtol(text, nullptr, 10);
  return pid > 1 ? static_cast<pid_t>(pid) : 0;
}

// Whether `pid` has exited: it is gone, or a zombie that its new parent has not reaped
// yet (a trainer that runs as PID 1 of its container reaps nobody).
bool Exited(pid_t pid) {
  if (kill(pid, 0) != 0) return errno == ESRCH;
  char path[64];
  std::snprintf(path, sizeof(path), "/proc/%d/stat", static_cast<int>(pid));
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT;
  char stat_line[512] = {};
  const ssize_t n = read(fd, stat_line, sizeof(stat_line) - 1);
  close(fd);
  if (n <= 0) return false;
  // "pid (comm) S ...": the state follows the last ')' (comm may contain one).
  const char* paren = std::strrchr(stat_line, ')');
  return paren != nullptr && paren[1] == ' ' && (paren[2] == 'Z' || paren[2] == 'X');
}

// The last line the daemon wrote to its log (why it exited), or "" if none is readable.
std::string LastLogLine(const std::string& log) {
  const int fd = open(log.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return "";
  struct stat st;
  std::string tail;
  if (fstat(fd, &st) == 0 && st.st_size > 0) {
    const off_t from = std::max<off_t>(0, st.st_size - 4096);
    tail.resize(static_cast<size_t>(st.st_size - from));
    const ssize_t n = pread(fd, tail.data(), tail.size(), from);
    tail.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  close(fd);
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == ' ')) tail.pop_back();
  const size_t newline = tail.find_last_of('\n');
  return newline == std::string::npos ? tail : tail.substr(newline + 1);
}

// The pid written in "<socket>.lock" by the zephond holding it, when that process is
// alive; 0 otherwise.
pid_t LiveLockHolder(const std::string& socket) {
  const std::string path = socket + ".lock";
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return 0;
  char text[32] = {};
  const ssize_t n = read(fd, text, sizeof(text) - 1);
  close(fd);
  const long pid = n > 0 ? std::strtol(text, nullptr, 10) : 0;
  return pid > 1 && !Exited(static_cast<pid_t>(pid)) ? static_cast<pid_t>(pid) : 0;
}

// How long a client keeps polling after the daemon it started exited: another rank's
// daemon may have won the socket's lock and be about to listen. With a live lock
// holder that does not listen (its socket file was deleted under it) the wait ends
// after kLockHolderGrace, which a daemon that is starting never takes.
constexpr absl::Duration kLostRaceGrace = absl::Seconds(1);
constexpr absl::Duration kLockHolderGrace = absl::Seconds(10);

}  // namespace

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectOrStart(const ConnectOptions& options) {
  const std::string socket = options.socket_path.empty() ? DefaultSocketPath() : options.socket_path;
  grpc::ChannelArguments args = RpcChannelArguments();  // checkpoints exceed 4 MiB
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 200);
  // gRPC shares subchannels process-wide by default; a connection to a daemon that
  // died must never be reused for its restarted successor on the same socket.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto channel =
      grpc::CreateCustomChannel("unix:" + socket, grpc::InsecureChannelCredentials(), args);
  // Without a daemon binary to start, a daemon that is starting up (systemd, a pod's
  // sidecar) gets a short grace; with one, an absent listener is started at once.
  const absl::Time start = absl::Now();
  const absl::Duration grace = absl::Milliseconds(300);
  absl::Duration poll = absl::Milliseconds(1);
  Listener listener = ProbeListener(socket);
  while (listener == Listener::kAbsent && options.zephond_path.empty() &&
         absl::Now() - start < grace) {
    SleepAndBackOff(&poll);
    listener = ProbeListener(socket);
  }
  if (listener != Listener::kAbsent && Answers(channel, grace)) return channel;
  if (options.zephond_path.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "no zephond answers at ", socket, ": start one (systemd unit or `zephond --socket ",
        socket, "`), or point ZEPHON_SOCKET at the node's daemon"));
  }
  // The daemon will refuse a directory that is not private (exit 4); refuse it here
  // first, with the same message, instead of waiting for a daemon that never answers.
  const size_t slash = socket.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : socket.substr(0, slash));
  if (absl::Status private_dir = EnsurePrivateDir(dir, geteuid()); !private_dir.ok()) {
    return absl::Status(private_dir.code(),
                        absl::StrCat("cannot start zephond for ", socket, ": ",
                                     private_dir.message()));
  }
  double idle_exit_s = options.idle_exit_s;
  if (const char* env = std::getenv("ZEPHON_IDLE_EXIT_S"); env != nullptr && *env != '\0') {
    idle_exit_s = std::atof(env);
  }
  absl::StatusOr<pid_t> daemon = SpawnDaemon(options.zephond_path, socket, idle_exit_s);
  if (!daemon.ok()) return daemon.status();
  // Poll with plain connects (every 1 ms at first) until the new daemon listens, and
  // only then dial over gRPC: its first attempt then succeeds, with no backoff to wait.
  // A daemon that exits instead (its socket's lock is held, a bad flag) is an error
  // within a second, with its last words, not a wait for the whole timeout.
  const absl::Time deadline = absl::Now() + options.timeout;
  absl::Time exited_at = absl::InfiniteFuture();
  poll = absl::Milliseconds(1);
  while (absl::Now() < deadline) {
    if (ProbeListener(socket) != Listener::kAbsent &&
        Answers(channel, std::min(absl::Milliseconds(200), deadline - absl::Now()))) {
      return channel;
    }
    if (*daemon != 0 && exited_at == absl::InfiniteFuture() && Exited(*daemon)) {
      exited_at = absl::Now();
    }
    const absl::Duration since_exit = absl::Now() - exited_at;
    if (since_exit > kLostRaceGrace) {
      const pid_t holder = LiveLockHolder(socket);
      if (holder != 0 && since_exit <= kLockHolderGrace) {
        SleepAndBackOff(&poll);
        continue;  // the winner of the lock may still be starting
      }
      const std::string last = LastLogLine(socket + ".log");
      return absl::UnavailableError(absl::StrCat(
          "started zephond (pid ", *daemon, ") for ", socket, " but it exited without listening",
          last.empty() ? "" : absl::StrCat(": \"", last, "\""),
          holder == 0 ? ""
                      : absl::StrCat("; zephond pid ", holder, " holds ", socket,
                                     ".lock but does not listen there (was the socket file "
                                     "deleted? stop it: kill ", holder, ")"),
          "; see its log at ", socket, ".log"));
    }
    SleepAndBackOff(&poll);
  }
  return absl::UnavailableError(absl::StrCat(
      "started zephond for ", socket, " but it did not answer within ",
      absl::FormatDuration(options.timeout), "; see its log at ", socket, ".log"));
}

}  // namespace zephon::client
