#include "client/connection.h"

#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/paths.h"
#include "common/rpc_limits.h"

extern char** environ;

namespace zephon::client {
namespace {

bool Answers(const std::shared_ptr<grpc::Channel>& channel, absl::Duration wait) {
  return channel->WaitForConnected(absl::ToChronoTime(absl::Now() + wait));
}

// Starts `zephond` through `sh -c '... &'` in a new session so it is reparented to init
// at once: no zombie in the trainer, no controlling terminal, no inherited signals.
absl::Status SpawnDaemon(const std::string& zephond, const std::string& socket, double idle_exit_s) {
  struct stat st;
  if (stat(zephond.c_str(), &st) != 0 || !(st.st_mode & S_IXUSR)) {
    return absl::NotFoundError(absl::StrCat("cannot start zephond: '", zephond,
                                            "' is not an executable file (run `make build`, or "
                                            "set ZEPHOND to the binary)"));
  }
  const std::string log = socket + ".log";
  const std::string idle = absl::StrCat(idle_exit_s);
  std::vector<std::string> args = {"/bin/sh", "-c",
                                   "\"$0\" \"$@\" </dev/null >>\"$ZEPHON_SPAWN_LOG\" 2>&1 &",
                                   zephond, "--socket", socket, "--idle-exit-s", idle};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage = {"ZEPHON_SPAWN_LOG=" + log};
  for (char** e = environ; *e != nullptr; ++e) env_storage.emplace_back(*e);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);

  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/bin/sh", nullptr, &attr, argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
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
  const std::string dir = socket.substr(0, socket.find_last_of('/'));
  if (!dir.empty()) {
    for (size_t i = 1; i <= dir.size(); ++i) {
      if (i == dir.size() || dir[i] == '/') mkdir(dir.substr(0, i).c_str(), 0700);
    }
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
