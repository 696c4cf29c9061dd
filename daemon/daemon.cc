#include "daemon/daemon.h"

#include <signal.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <system_error>
#include <filesystem>
#include <thread>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/owned_path.h"
#include "common/paths.h"
#include "common/rpc_limits.h"
#include "common/status_macros.h"
#include "daemon/audit/audit_log.h"
#include "daemon/checkpoint/peer_auth.h"
#include "daemon/checkpoint/peer_credentials.h"
#include "common/cache_dir.h"
#include "daemon/log_file_sink.h"
#include "daemon/pipeline/formats/token_cache.h"
#include "daemon/pipeline/formats/json_kernel.h"
#include "daemon/storage/shard_cache.h"
#include "shm/fd_passing.h"
#include "shm/segment.h"

namespace zephon::daemon {
namespace {

// 128 random bits in hex: this process's id in rendezvous files. Without entropy (a
// getrandom that fails), pid and clock, which still differ between live daemons of
// one node.
std::string NewInstanceId() {
  uint64_t raw[2] = {0, 0};
  if (getrandom(raw, sizeof(raw), 0) != static_cast<ssize_t>(sizeof(raw))) {
    raw[0] = static_cast<uint64_t>(::getpid());
    raw[1] = static_cast<uint64_t>(absl::ToUnixNanos(absl::Now()));
  }
  return absl::StrFormat("%016x%016x", raw[0], raw[1]);
}

// The one process global: a signal handler can only reach static storage, and a
// lock-free atomic store is async-signal-safe. Run() polls it.
std::atomic<bool> g_stop_signal{false};
static_assert(std::atomic<bool>::is_always_lock_free);

void OnSignal(int) { g_stop_signal.store(true); }

absl::Status BadFlags(const absl::Status& status) {
  return absl::InvalidArgumentError(status.message());
}
absl::Status Environment(const absl::Status& status) {
  return absl::FailedPreconditionError(status.message());
}

}  // namespace

int ExitCodeFor(const absl::Status& status) {
  if (status.ok()) return kExitClean;
  if (absl::IsInvalidArgument(status)) return kExitBadFlags;
  if (absl::IsAlreadyExists(status)) return kExitLockHeld;
  return kExitEnvironment;
}

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(DaemonFlags flags, Env* env) {
  std::unique_ptr<Daemon> daemon(new Daemon(std::move(flags), env));
  const DaemonFlags& f = daemon->flags_;
  absl::StatusOr<std::optional<gid_t>> gid = ShmGroupId(f);
  if (!gid.ok()) return gid.status();
  daemon->shm_group_id_ = *gid;

  // The socket's directory holds the lock (and an auto-started daemon's log): it must be
  // private, or another user could plant symlinks there for a root daemon to write
  // through. Created 0700; 0750 and the --shm-group group so members reach the socket.
  // Ensured before --log-file is opened (a log inside it must not create it with the
  // log's mode); errors go to stderr (journald) since no log is open yet.
  const std::string socket_dir = std::filesystem::path(f.socket_path).parent_path().string();
  if (absl::Status dir = EnsurePrivateDir(socket_dir.empty() ? "." : socket_dir, geteuid(),
                                          *gid ? 0750 : 0700, *gid);
      !dir.ok()) {
    std::fprintf(stderr, "zephond: refusing --socket %s: %s\n", f.socket_path.c_str(),
                 std::string(dir.message()).c_str());
    return Environment(dir);
  }

  // stderr when no file is given: journald and kubectl logs collect it. One sink, one
  // named logger per subsystem. The file is opened by us, never through a symlink.
  spdlog::sink_ptr sink;
  if (f.log_file.empty()) {
    sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  } else {
    absl::StatusOr<std::shared_ptr<LogFileSink>> file_sink = LogFileSink::Open(f.log_file);
    if (!file_sink.ok()) {
      std::fprintf(stderr, "zephond: %s\n", std::string(file_sink.status().message()).c_str());
      return Environment(file_sink.status());
    }
    sink = *std::move(file_sink);
  }
  InstallLoggers(sink, spdlog::level::from_str(f.log_level));
  // Before any JSON is parsed: a parser keeps the kernel of its first parse.
  if (const absl::Status& kernel = pipeline::ApplyJsonKernelOverride(); !kernel.ok()) {
    spdlog::error("{}", std::string(kernel.message()));
    return Environment(kernel);
  }
  spdlog::info("JSON is parsed with simdjson's {} kernel (value walk: {})",
               pipeline::JsonKernelName(), pipeline::JsonWalkKernelName());
  if (daemon->flags_.shm_prefix.empty()) {
    daemon->flags_.shm_prefix = DefaultShmPrefix(f.socket_path);
  }

  absl::StatusOr<std::unique_ptr<DaemonLock>> lock =
      DaemonLock::Acquire(LockPathFor(f.socket_path));
  if (!lock.ok()) {
    spdlog::error("{}", lock.status().ToString());
    return absl::IsAlreadyExists(lock.status()) ? lock.status() : Environment(lock.status());
  }
  daemon->lock_ = *std::move(lock);
  absl::StatusOr<int> swept = shm::Segment::SweepPrefix(f.shm_prefix + ".", shm::kDefaultShmDir, env);
  if (!swept.ok()) {
    spdlog::error("cannot sweep stale shm segments {}.*: {}", f.shm_prefix,
                  swept.status().ToString());
    return Environment(swept.status());
  }
  if (*swept > 0) {
    spdlog::warn("swept {} legacy /dev/shm segment(s) left by an older zephond", *swept);
  }
  unlink(f.socket_path.c_str());
  if (f.shm_mode_text != "0600") {
    spdlog::warn("--shm-mode={} has no effect: rings are memfds handed to readers over the "
                 "ring hand-off socket; access follows the socket's mode and --shm-group",
                 f.shm_mode_text);
  }
  if (absl::Status started = daemon->StartServers(); !started.ok()) return started;
  return daemon;
}

absl::Status Daemon::StartServers() {
  const DaemonFlags& f = flags_;
  RegistryOptions options;
  options.shm_prefix = f.shm_prefix;
  options.max_ring_bytes = f.max_ring_bytes;
  options.cache_dir = f.cache_dir;
  options.audit_dir = f.audit_dir;
  options.max_jsonl_line_bytes = f.max_jsonl_line_bytes;
  options.counters = counters_;
  options.env = env_;
  {
    storage::ShardCacheOptions cache;
    cache.dir = (f.cache_dir.empty() ? DefaultCacheDir() : f.cache_dir) + "/objects";
    cache.max_bytes = f.shard_cache_bytes;
    cache.block_bytes = f.shard_cache_block_bytes;
    absl::StatusOr<std::shared_ptr<storage::ShardCache>> shard_cache =
        storage::ShardCache::Create(cache);
    if (!shard_cache.ok()) {
      spdlog::error("--shard-cache-*: {}", shard_cache.status().ToString());
      return BadFlags(shard_cache.status());
    }
    options.shard_cache = *std::move(shard_cache);
  }
  {
    absl::StatusOr<std::shared_ptr<pipeline::TokenCache>> token_cache =
        pipeline::TokenCache::Create(f.cache_dir.empty() ? DefaultCacheDir() : f.cache_dir,
                                     f.token_cache_bytes);
    if (!token_cache.ok()) {
      spdlog::error("--cache-dir: {}", token_cache.status().ToString());
      return Environment(token_cache.status());
    }
    options.token_cache = *std::move(token_cache);
  }
  absl::StatusOr<storage::S3Options> s3 = storage::S3OptionsFromFlags(f.s3);
  if (!s3.ok()) {
    spdlog::error("{}", std::string(s3.status().message()));
    return BadFlags(s3.status());
  }
  s3->counters = std::make_shared<storage::S3Counters>();  // every store's, for /metrics
  options.s3 = *s3;
  {
    checkpoint::RoundAggregatorOptions aggregator_options;
    aggregator_options.s3 = *s3;
    aggregator_options.env = env_;
    // The leader merges an audited run's logs into per-lane-round records at each
    // completed round, on the merger's thread (daemon/audit/step_merge.h).
    try {
      step_merger_ = std::make_unique<audit::StepMerger>();
    } catch (const std::system_error& e) {  // its thread: audited runs go unmerged
      spdlog::warn("no thread for merging audit logs at checkpoints ({}): they are not merged",
                   e.what());
    }
    aggregator_options.on_complete = [merger = step_merger_.get(), audit_dir = f.audit_dir](
                                         const proto::CheckpointState& state,
                                         const std::string& aggregate_dir) {
      if (merger == nullptr || state.lanes().empty()) return;
      uint64_t through = UINT64_MAX;
      for (const proto::LaneProgress& lane : state.lanes()) {
        through = std::min<uint64_t>(through, lane.next_batch_index());
      }
      for (const std::string& dir :
           {aggregate_dir.empty() || absl::StartsWith(aggregate_dir, "s3://")
                ? std::string()
                : audit::AggregateAuditDir(aggregate_dir, state.run_id()),
            audit_dir.empty() ? std::string() : audit::DaemonAuditDir(audit_dir, state.run_id())}) {
        struct stat st;
        if (!dir.empty() && stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
          merger->Enqueue(dir, through);
          return;
        }
      }
    };
    aggregator_ = std::make_unique<checkpoint::RoundAggregator>(aggregator_options);
    options.forget_finished_rounds = [aggregator = aggregator_.get()](const std::string& run) {
      return aggregator->ForgetRun(run);
    };
  }
  options.default_prefetch_batches = f.prefetch_batches;
  // Created before the registry and shut down after it: instances submit to it.
  absl::StatusOr<std::unique_ptr<exec::WorkerPool>> pool =
      exec::WorkerPool::Create(f.worker_threads, "zephond workers");
  if (!pool.ok()) {
    spdlog::error("--worker-threads={}: {}", f.worker_threads, pool.status().ToString());
    return absl::IsInvalidArgument(pool.status()) ? pool.status() : Environment(pool.status());
  }
  worker_pool_ = *std::move(pool);
  options.worker_pool = worker_pool_;

  auto server_credentials = checkpoint::ServerCredentials(f.peer_tls);
  auto channel_credentials = checkpoint::ChannelCredentials(f.peer_tls);
  if (!server_credentials.ok() || !channel_credentials.ok()) {
    const absl::Status& bad = !server_credentials.ok() ? server_credentials.status()
                                                       : channel_credentials.status();
    spdlog::error("peer TLS: {}", bad.ToString());
    return BadFlags(bad);
  }
  std::shared_ptr<const checkpoint::PeerAuthenticator> peer_auth;
  if (!f.peer_secret_file.empty()) {
    checkpoint::PeerAuthOptions auth_options;
    auth_options.env = env_;
    auto loaded = checkpoint::PeerAuthenticator::FromFile(f.peer_secret_file, auth_options);
    if (!loaded.ok()) {
      spdlog::error("{}", std::string(loaded.status().message()));
      return BadFlags(loaded.status());
    }
    peer_auth = *std::move(loaded);
  }
  RETURN_IF_ERROR(StartPeerServer(*server_credentials, peer_auth, &options));
  options.daemon_label = f.socket_path;
  // Socket paths and pids repeat across nodes and containers; this id does not, so a
  // rendezvous file written by this process is recognized as its own.
  options.daemon_instance = NewInstanceId();

  if (!f.metrics_address.empty()) {
    absl::StatusOr<std::unique_ptr<metrics::MetricsEndpoint>> created =
        metrics::MetricsEndpoint::Create(f.metrics_address);
    if (!created.ok()) {
      SubsystemLogger("metrics")->error("{}", created.status().ToString());
      return absl::IsInvalidArgument(created.status()) ? created.status()
                                                       : Environment(created.status());
    }
    metrics_ = *std::move(created);
    options.metrics_address = metrics_->address();
  }

  registry_ = std::make_unique<InstanceRegistry>(options);
  peer_status_service_->Bind(registry_.get());
  led_runs_.store(registry_.get());
  if (metrics_ != nullptr) {
    metrics_->Start([registry = registry_.get()] { return registry->Status(); },
                    counters_.get(), &health_);
    SubsystemLogger("metrics")->info("metrics on http://{}/metrics (/healthz, /readyz)",
                                     metrics_->address());
  }
  // A report that waits for its leader finds this daemon leading once rank 0 attaches
  // here.
  router_ = std::make_unique<checkpoint::CheckpointRouter>(
      aggregator_.get(), *channel_credentials, *s3, peer_auth, env_,
      [this](const std::string& run_id) {
        const InstanceRegistry* registry = led_runs_.load();
        return registry != nullptr && registry->LedRun(run_id).has_value();
      },
      options.peer_address, options.daemon_instance, options.daemon_label);
  checkpoint::LocalRoundsOptions rounds_options;
  rounds_options.daemon_label = f.socket_path;
  rounds_options.roster = registry_.get();
  rounds_options.reporter = router_.get();
  rounds_options.counters = counters_.get();
  rounds_options.env = env_;
  rounds_ = std::make_unique<checkpoint::LocalRounds>(std::move(rounds_options));
  return StartClientServer();
}

absl::Status Daemon::StartPeerServer(
    const std::shared_ptr<grpc::ServerCredentials>& credentials,
    const std::shared_ptr<const checkpoint::PeerAuthenticator>& auth, RegistryOptions* options) {
  const DaemonFlags& f = flags_;
  // Checkpoint rounds of runs whose rank 0 is attached here, held against the runs
  // this daemon leads.
  peer_service_ = std::make_unique<checkpoint::PeerService>(
      aggregator_.get(), checkpoint::PeerServiceOptions{
                        auth,
                        [this](const std::string& run_id) {
                          const InstanceRegistry* registry = led_runs_.load();
                          return registry == nullptr ? std::nullopt : registry->LedRun(run_id);
                        },
                        env_});
  // Status for `zephonctl status --address host:port`, with the peer credentials.
  peer_status_service_ = std::make_unique<PeerStatusService>(auth);
  if (f.peer_address.empty()) {
    SubsystemLogger("peer")->info(
        "no peer service (no TCP port): checkpoint rounds of runs on this node only; runs "
        "spanning nodes need --peer-address");
    return absl::OkStatus();
  }
  grpc::ServerBuilder builder;
  ApplyPeerServerLimits(&builder);  // results exceed 4 MiB; requests stay small
  int peer_port = 0;
  builder.AddListeningPort(f.peer_address, credentials, &peer_port);
  builder.RegisterService(peer_service_.get());
  builder.RegisterService(peer_status_service_.get());
  peer_server_ = builder.BuildAndStart();
  if (peer_server_ == nullptr || peer_port == 0) {
    spdlog::error("cannot listen for peers on --peer-address={}", f.peer_address);
    return absl::UnavailableError(
        absl::StrCat("cannot listen for peers on --peer-address=", f.peer_address));
  }
  std::string advertise = f.advertise_address;
  if (advertise.empty()) {
    std::string host = f.peer_address.substr(0, f.peer_address.rfind(':'));
    if (host == "0.0.0.0" || host == "[::]" || host.empty()) {
      char name[256] = {0};
      gethostname(name, sizeof(name) - 1);
      host = name;
    }
    advertise = host + ":" + std::to_string(peer_port);
  }
  options->peer_address = advertise;
  const bool mutual_tls = !f.peer_tls.ca_file.empty();
  SubsystemLogger("peer")->info(
      "peer service (checkpoints, Status) bound to {} (advertised as {}; {})", f.peer_address,
      advertise,
      mutual_tls ? (auth ? "mutual TLS + shared secret" : "mutual TLS")
                 : (auth ? (f.peer_tls.enabled() ? "TLS + shared secret" : "shared secret")
                         : "INSECURE: no peer authentication"));
  return absl::OkStatus();
}

absl::Status Daemon::StartClientServer() {
  const DaemonFlags& f = flags_;
  FdHandoffOptions handoff_options;
  handoff_options.socket_path = shm::HandoffSocketPath(f.socket_path);
  handoff_options.group = shm_group_id_;
  handoff_options.env = env_;
  absl::StatusOr<std::unique_ptr<FdHandoff>> handoff = FdHandoff::Start(handoff_options);
  if (!handoff.ok()) {
    spdlog::error("{}", handoff.status().ToString());
    return Environment(handoff.status());
  }
  handoff_ = *std::move(handoff);
  service_ = std::make_unique<ZephonService>(registry_.get(), rounds_.get(), handoff_.get(),
                                             counters_.get(), env_);

  grpc::ServerBuilder builder;
  ApplyRpcMessageLimits(&builder);  // restores and checkpoints exceed 4 MiB
  builder.AddListeningPort("unix:" + f.socket_path, grpc::InsecureServerCredentials());
  builder.RegisterService(service_.get());
  server_ = builder.BuildAndStart();
  if (server_ == nullptr) {
    spdlog::error("cannot listen on unix socket {}", f.socket_path);
    return absl::UnavailableError(absl::StrCat("cannot listen on unix socket ", f.socket_path));
  }
  chmod(f.socket_path.c_str(), shm_group_id_ ? 0660 : 0600);
  if (shm_group_id_ &&
      chown(f.socket_path.c_str(), static_cast<uid_t>(-1), *shm_group_id_) != 0) {
    const int err = errno;
    spdlog::error("cannot give socket {} to group {}: {}", f.socket_path, f.shm_group,
                  std::strerror(err));
    return Environment(absl::ErrnoToStatus(
        err, absl::StrCat("cannot give socket ", f.socket_path, " to group ", f.shm_group)));
  }
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  signal(SIGPIPE, SIG_IGN);
  spdlog::info("zephond {} listening on {} (shm prefix {}, idle exit {}, {} worker threads)",
               getpid(), f.socket_path, f.shm_prefix,
               f.idle_exit_s > 0 ? std::to_string(f.idle_exit_s) + " s" : "off",
               f.worker_threads);
  return absl::OkStatus();
}

void Daemon::Run() {
  health_.loop_tick_ms.store(metrics::SteadyNowMs());
  health_.ready.store(true);
  while (!g_stop_signal.load()) {
    health_.loop_tick_ms.store(metrics::SteadyNowMs());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    registry_->Tick();
    if (flags_.idle_exit_s > 0 &&
        env_->Now() - registry_->idle_since() > absl::Seconds(flags_.idle_exit_s)) {
      spdlog::info("no readers for {} s; exiting", flags_.idle_exit_s);
      break;
    }
  }
}

void Daemon::Shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  // 1-2.
  health_.ready.store(false);
  spdlog::info("shutting down");
  registry_->BeginShutdown();
  rounds_->Shutdown();
  if (aggregator_ != nullptr) aggregator_->Shutdown();
  // 3. Attach streams only end by cancellation, so do not wait long for them.
  std::atomic<bool> servers_down{false};
  std::thread stopper([&] {
    server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    if (peer_server_ != nullptr) {
      peer_server_->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    }
    servers_down.store(true);
  });
  for (int i = 0; i < 50 && !servers_down.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!servers_down.load()) ExitWithoutServers();
  stopper.join();
  // 4.
  health_.loop_tick_ms.store(0);
  if (metrics_ != nullptr) metrics_->Stop();  // within ~100 ms
  // 5.
  registry_->CloseAll();
  worker_pool_->Shutdown();  // runs what instances left queued (skipped: cancelled)
  unlink(flags_.socket_path.c_str());
}

void Daemon::ExitWithoutServers() {
  spdlog::warn("gRPC handlers still busy after 5 s (a checkpoint round waiting on its "
               "leader); exiting without them");
  if (metrics_ != nullptr) metrics_->Stop();
  registry_->CloseAll();
  unlink(flags_.socket_path.c_str());
  unlink(shm::HandoffSocketPath(flags_.socket_path).c_str());
  spdlog::shutdown();
  _exit(kExitClean);
}

Daemon::~Daemon() {
  // A Start that failed part-way leaves no server to stop.
  if (server_ != nullptr) Shutdown();
}

}  // namespace zephon::daemon
