#include "client/connection.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/owned_path.h"
#include "common/paths.h"
#include "common/rpc_limits.h"

extern char** environ;

namespace zephon::client {
namespace {

bool Answers(const std::shared_ptr<grpc::Channel>& channel, absl::Duration wait) {
  return channel->WaitForConnected(absl::ToChronoTime(absl::Now() + wait));
}

// Starts `zephond` through `sh -c '... &'` in a new session so it is reparented to init
// at once: no zombie in the trainer, no controlling terminal, no inherited signals. Its
// output goes to "<socket>.log", opened here without following symlinks (a shell's `>>`
// would append through one planted at that path) and handed over as stdout and stderr.
absl::Status SpawnDaemon(const std::string& zephond, const std::string& socket, double idle_exit_s) {
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
  const std::string idle = absl::StrCat(idle_exit_s);
  // An auto-started daemon serves this node's ranks only: no TCP port at all (no peer
  // service, no metrics endpoint); multi-node runs use an operator-run zephond.
  std::vector<std::string> args = {"/bin/sh", "-c", "\"$0\" \"$@\" </dev/null &",
                                   zephond, "--socket", socket, "--idle-exit-s", idle,
                                   "--metrics-address", ""};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, *log_fd, STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&files, *log_fd, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/bin/sh", &files, &attr, argv.data(), environ);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&files);
  close(*log_fd);
  if (rc != 0) {
    return absl::InternalError(absl::StrCat("cannot start zephond: ", std::strerror(rc)));
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return absl::OkStatus();
}

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
  if (Answers(channel, absl::Milliseconds(300))) return channel;
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
  if (absl::Status s = SpawnDaemon(options.zephond_path, socket, idle_exit_s); !s.ok()) {
    return s;
  }
  const absl::Time deadline = absl::Now() + options.timeout;
  while (absl::Now() < deadline) {
    if (Answers(channel, absl::Milliseconds(200))) return channel;
  }
  return absl::UnavailableError(absl::StrCat(
      "started zephond for ", socket, " but it did not answer within ",
      absl::FormatDuration(options.timeout), "; see its log at ", socket, ".log"));
}

}  // namespace zephon::client
