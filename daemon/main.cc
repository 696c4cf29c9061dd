// zephond: the per-node Zephon daemon. See DESIGN.md and README.md.
//
// Startup order matters: take the per-socket lock, then sweep legacy (ring layout 1)
// /dev/shm segments left by a dead predecessor with the same prefix (no live owner can
// exist once we hold the lock), then listen on the socket and on the ring hand-off
// socket next to it ("<socket>.fds"). Rings are sealed memfds handed to readers there
// (daemon/fd_handoff.h), so a killed zephond leaves no ring behind. Exits 0 on SIGTERM/SIGINT, and by itself after --idle-exit-s
// seconds without readers when it was auto-started by a client.
//
// Operations: --metrics-address serves Prometheus /metrics plus /healthz and /readyz;
// --config reads the same long flags from a TOML/INI file (the command line wins).
// aggregate_dir and datasets may be s3:// URLs: S3 requests use the --s3-* flags
// (storage/s3_flags.h), then AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID /
// AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN or ~/.aws/credentials (AWS_PROFILE).
// s3:// datasets are read through one node-wide shard cache in <cache-dir>/objects
// (--shard-cache-bytes, --shard-cache-block-bytes).
#include <grp.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <grpcpp/grpcpp.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/owned_path.h"
#include "common/paths.h"
#include "common/rpc_limits.h"
#include "daemon/checkpoint/checkpoint_router.h"
#include "daemon/checkpoint/local_rounds.h"
#include "daemon/checkpoint/peer_auth.h"
#include "daemon/checkpoint/peer_credentials.h"
#include "daemon/checkpoint/peer_service.h"
#include "daemon/checkpoint/round_aggregator.h"
#include "daemon/daemon_lock.h"
#include "daemon/log_file_sink.h"
#include "daemon/metrics/counters.h"
#include "daemon/metrics/daemon_metrics.h"
#include "daemon/metrics/http_server.h"
#include "daemon/exec/worker_pool.h"
#include "daemon/fd_handoff.h"
#include "daemon/instance_registry.h"
#include "daemon/pipeline/jsonl_reader.h"
#include "daemon/service.h"
#include "daemon/storage/s3_flags.h"
#include "daemon/storage/shard_cache.h"
#include "shm/fd_passing.h"
#include "shm/segment.h"

namespace {

std::atomic<bool> g_stop{false};

void OnSignal(int) { g_stop.store(true); }

// Exit codes: 0 clean, 2 bad flags, 3 lock held (another daemon), 4 environment.
constexpr int kExitBadFlags = 2;
constexpr int kExitLockHeld = 3;
constexpr int kExitEnvironment = 4;

// Health: the main loop stamps this every tick; /healthz fails when it stops.
std::atomic<int64_t> g_loop_tick_ms{0};
// Readiness: lock held, stale segments swept, gRPC listening, not shutting down.
std::atomic<bool> g_ready{false};

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

zephon::metrics::HttpResponse ServeHttp(const std::string& target,
                                        const zephon::daemon::InstanceRegistry& registry) {
  const std::string path = target.substr(0, target.find('?'));
  zephon::metrics::HttpResponse out;
  if (path == "/metrics") {
    out.content_type = "text/plain; version=0.0.4; charset=utf-8";
    out.body = zephon::metrics::RenderPrometheusText(zephon::metrics::CollectDaemonMetrics(
        registry.Status(), zephon::metrics::DaemonCounters::Get(),
        zephon::metrics::ReadProcessStats()));
  } else if (path == "/healthz") {
    const int64_t tick = g_loop_tick_ms.load();
    const bool alive = tick > 0 && NowMs() - tick < 5000;
    out.status = alive ? 200 : 503;
    out.body = alive ? "ok\n" : "main loop not running\n";
  } else if (path == "/readyz") {
    const bool ready = g_ready.load();
    out.status = ready ? 200 : 503;
    out.body = ready ? "ready\n" : "not ready\n";
  } else {
    out.status = 404;
    out.body = "not found: try /metrics, /healthz or /readyz\n";
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zephond: Zephon's per-node data-loading daemon"};
  app.footer(
      "Config file: --config FILE reads `key = value` lines (TOML or INI) whose keys are the "
      "long flag names without the leading --, e.g. `metrics-address = \"0.0.0.0:9464\"` or "
      "`worker-threads = 4`; flags given on the command line override the file, and an "
      "unknown key is an error (exit 2).\n"
      "Metrics: GET /metrics (Prometheus text), /healthz (200 while the main loop runs), "
      "/readyz (200 once serving, 503 while shutting down) on --metrics-address.\n"
      "Object storage: aggregate_dir and dataset paths may be s3://bucket/prefix. Datasets "
      "(a directory, a glob or one object) are read with ranged GETs through the node's "
      "shard cache (<cache-dir>/objects). Endpoint, region and credentials: the --s3-* "
      "flags, else AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
      "AWS_SESSION_TOKEN or ~/.aws/credentials (AWS_PROFILE).\n"
      "Exit codes: 0 clean, 2 bad flags, 3 another zephond holds the socket, 4 environment.");
  app.set_config("--config", "", "Read flags from this TOML/INI file (see below)");
  app.allow_config_extras(CLI::config_extras_mode::error);
  std::string socket_path = zephon::DefaultSocketPath();
  std::string shm_prefix;
  std::string log_file;
  std::string log_level = "info";
  double idle_exit_s = 0;
  uint32_t prefetch_batches = 8;
  std::string shm_mode_text = "0600";
  std::string shm_group;
  uint64_t max_ring_bytes = 0;
  uint32_t worker_threads = zephon::exec::DefaultWorkerThreads();
  app.add_option("--socket", socket_path, "Unix domain socket to serve clients on")
      ->capture_default_str();
  app.add_option("--shm-prefix", shm_prefix,
                 "Prefix of this daemon's ring memfd names, and of the legacy /dev/shm "
                 "segments swept at start (default: zephon.<uid>.<socket hash>)");
  app.add_option("--shm-mode", shm_mode_text,
                 "Ignored since ring layout 2 (rings are memfds handed over the socket; "
                 "access follows the socket's mode and --shm-group)")
      ->capture_default_str();
  app.add_option("--shm-group", shm_group,
                 "Group that owns the socket and the ring hand-off socket (mode becomes "
                 "0660) and whose members may claim rings; for trainer ranks running as "
                 "another user of that group");
  app.add_option("--max-ring-bytes", max_ring_bytes,
                 "Budget for the bytes of all rings together (0 = no budget beyond the "
                 "memory limit of zephond's cgroup)")
      ->capture_default_str();
  app.add_option("--idle-exit-s", idle_exit_s,
                 "Exit after this many seconds without attached readers (0 = never)")
      ->capture_default_str();
  app.add_option("--prefetch-batches", prefetch_batches, "Default ring slots per instance")
      ->capture_default_str();
  std::string peer_address;
  std::string advertise_address;
  zephon::checkpoint::PeerTlsOptions peer_tls;
  std::string peer_secret_file;
  bool peer_insecure = false;
  app.add_option("--peer-address", peer_address,
                 "host:port of the daemon-to-daemon service (checkpoint rounds of runs "
                 "spanning nodes, and `zephonctl status --address`); empty (the default) = "
                 "no TCP port at all: runs whose ranks are all on this node checkpoint over "
                 "the Unix socket. Needs peer authentication: --peer-tls-cert/-key/-ca "
                 "(mutual TLS), --peer-secret-file, or --peer-insecure");
  app.add_option("--advertise-address", advertise_address,
                 "host:port peers use to reach this daemon (default: --peer-address with "
                 "the bound port; the hostname when it binds 0.0.0.0)");
  app.add_option("--peer-tls-cert", peer_tls.cert_file, "PEM certificate for peer traffic");
  app.add_option("--peer-tls-key", peer_tls.key_file, "PEM private key for peer traffic");
  app.add_option("--peer-tls-ca", peer_tls.ca_file,
                 "PEM CA bundle: verify peers with it (mutual TLS)");
  app.add_option("--peer-secret-file", peer_secret_file,
                 "File holding a secret shared by every zephond of the cluster (32+ bytes, "
                 "mode 0400, e.g. a Kubernetes Secret): peer calls are signed with it "
                 "(HMAC-SHA256) and unsigned ones refused");
  app.add_flag("--peer-insecure", peer_insecure,
               "Serve --peer-address without authentication: anyone who can reach the port "
               "can read status and take part in checkpoint rounds. Trusted networks only");
  std::string cache_dir;
  app.add_option("--cache-dir", cache_dir,
                 "Directory for converted dataset shards (JSONL token caches) and, under "
                 "objects/, the shard cache of s3:// datasets; default "
                 "$XDG_CACHE_HOME/zephon or ~/.cache/zephon");
  uint64_t max_jsonl_line_bytes = zephon::pipeline::kDefaultMaxLineBytes;
  app.add_option("--max-jsonl-line-bytes", max_jsonl_line_bytes,
                 "Longest line (decompressed bytes) of a JSONL dataset file; a longer line "
                 "fails that dataset naming the file and line instead of being buffered "
                 "whole (a 1 MB .jsonl.gz can hold a 1 GiB line)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  uint64_t shard_cache_bytes = uint64_t{16} << 30;
  uint64_t shard_cache_block_bytes = uint64_t{8} << 20;
  app.add_option("--shard-cache-bytes", shard_cache_bytes,
                 "Disk budget of the node's cache of s3:// dataset bytes (<cache-dir>/objects, "
                 "shared by all instances; least recently used blocks are evicted, blocks "
                 "being read are kept). 0 = no disk cache: blocks are held in memory only "
                 "while read, plus a 64 MiB LRU")
      ->capture_default_str();
  app.add_option("--shard-cache-block-bytes", shard_cache_block_bytes,
                 "Ranged-GET block size of s3:// dataset objects; objects up to this size are "
                 "fetched whole (one GET)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{4096}, uint64_t{1} << 30));
  zephon::storage::S3Flags s3_flags;
  zephon::storage::AddS3Flags(app, &s3_flags);
  app.add_option("--worker-threads", worker_threads,
                 "Threads of the one worker pool shared by all instances (the node-wide "
                 "thread budget for reading batches; 0 = each instance reads on its "
                 "producer thread). Default: half the cores")
      ->capture_default_str();
  app.add_option("--log-file", log_file, "Log to this file instead of stderr");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, critical, off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  std::string metrics_address = "127.0.0.1:0";
  app.add_option("--metrics-address", metrics_address,
                 "host:port of the Prometheus endpoint (/metrics, /healthz, /readyz); port 0 "
                 "= any free port (see the log or `status`); empty disables it")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitBadFlags;
  }

  // --shm-group names the group of the socket directory: validated before anything is
  // created, so an unknown group never leaves a 0700 directory behind that later runs
  // (with the group fixed) would have to repair by hand.
  std::optional<gid_t> shm_group_id;
  if (!shm_group.empty()) {
    const struct group* gr = getgrnam(shm_group.c_str());
    if (gr == nullptr) {
      std::fprintf(stderr,
                   "zephond: --shm-group=%s: no such group (create it with `groupadd %s` or "
                   "drop the flag)\n",
                   shm_group.c_str(), shm_group.c_str());
      return kExitBadFlags;
    }
    shm_group_id = gr->gr_gid;
  }

  // The socket's directory holds the lock (and an auto-started daemon's log): it must be
  // private, or another user could plant symlinks there for a root daemon to write
  // through. Created 0700; 0750 and the --shm-group group so members reach the socket.
  // Ensured before --log-file is opened: a log inside this directory must not create it
  // first (with the log's mode), and the error goes to stderr (journald) since no log
  // file is open yet.
  const std::string socket_dir = std::filesystem::path(socket_path).parent_path().string();
  if (absl::Status dir = zephon::EnsurePrivateDir(socket_dir.empty() ? "." : socket_dir,
                                                  geteuid(), shm_group_id ? 0750 : 0700,
                                                  shm_group_id);
      !dir.ok()) {
    std::fprintf(stderr, "zephond: refusing --socket %s: %s\n", socket_path.c_str(),
                 std::string(dir.message()).c_str());
    return kExitEnvironment;
  }

  // stderr when no file is given: journald and kubectl logs collect it. One sink, one
  // named logger per subsystem. The file is opened by us, never through a symlink.
  spdlog::sink_ptr sink;
  if (log_file.empty()) {
    sink = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  } else {
    absl::StatusOr<std::shared_ptr<zephon::daemon::LogFileSink>> file_sink =
        zephon::daemon::LogFileSink::Open(log_file);
    if (!file_sink.ok()) {
      std::fprintf(stderr, "zephond: %s\n", std::string(file_sink.status().message()).c_str());
      return kExitEnvironment;
    }
    sink = *std::move(file_sink);
  }
  zephon::InstallLoggers(sink, spdlog::level::from_str(log_level));
  if (shm_prefix.empty()) shm_prefix = zephon::DefaultShmPrefix(socket_path);

  auto lock = zephon::daemon::DaemonLock::Acquire(zephon::LockPathFor(socket_path));
  if (!lock.ok()) {
    spdlog::error("{}", lock.status().ToString());
    return absl::IsAlreadyExists(lock.status()) ? kExitLockHeld : kExitEnvironment;
  }
  absl::StatusOr<int> swept = zephon::shm::Segment::SweepPrefix(shm_prefix + ".");
  if (!swept.ok()) {
    spdlog::error("cannot sweep stale shm segments {}.*: {}", shm_prefix, swept.status().ToString());
    return kExitEnvironment;
  }
  if (*swept > 0) {
    spdlog::warn("swept {} legacy /dev/shm segment(s) left by an older zephond", *swept);
  }
  unlink(socket_path.c_str());

  zephon::daemon::RegistryOptions options;
  options.shm_prefix = shm_prefix;
  try {
    (void)std::stoul(shm_mode_text, nullptr, 8);
  } catch (const std::exception&) {
    spdlog::error("--shm-mode={} is not an octal permission (e.g. 0600)", shm_mode_text);
    return kExitBadFlags;
  }
  if (shm_mode_text != "0600") {
    spdlog::warn("--shm-mode={} has no effect: rings are memfds handed to readers over the "
                 "ring hand-off socket; access follows the socket's mode and --shm-group",
                 shm_mode_text);
  }
  options.max_ring_bytes = max_ring_bytes;
  options.cache_dir = cache_dir;
  options.max_jsonl_line_bytes = max_jsonl_line_bytes;
  {
    zephon::storage::ShardCacheOptions cache;
    cache.dir = (cache_dir.empty() ? zephon::pipeline::DefaultCacheDir() : cache_dir) + "/objects";
    cache.max_bytes = shard_cache_bytes;
    cache.block_bytes = shard_cache_block_bytes;
    absl::StatusOr<std::shared_ptr<zephon::storage::ShardCache>> shard_cache =
        zephon::storage::ShardCache::Create(cache);
    if (!shard_cache.ok()) {
      spdlog::error("--shard-cache-*: {}", shard_cache.status().ToString());
      return kExitBadFlags;
    }
    options.shard_cache = *std::move(shard_cache);
  }
  if (absl::Status s3 = zephon::storage::ApplyS3Flags(s3_flags); !s3.ok()) {
    spdlog::error("{}", std::string(s3.message()));
    return kExitBadFlags;
  }
  options.default_prefetch_batches = prefetch_batches;
  // Created before the registry and shut down after it: instances submit to it.
  absl::StatusOr<std::unique_ptr<zephon::exec::WorkerPool>> pool =
      zephon::exec::WorkerPool::Create(worker_threads, "zephond workers");
  if (!pool.ok()) {
    spdlog::error("--worker-threads={}: {}", worker_threads, pool.status().ToString());
    return absl::IsInvalidArgument(pool.status()) ? kExitBadFlags : kExitEnvironment;
  }
  options.worker_pool = *std::move(pool);
  std::shared_ptr<zephon::exec::WorkerPool> worker_pool = options.worker_pool;
  // The peer service: checkpoint rounds of runs whose rank 0 is attached here.
  auto server_credentials = zephon::checkpoint::ServerCredentials(peer_tls);
  auto channel_credentials = zephon::checkpoint::ChannelCredentials(peer_tls);
  if (!server_credentials.ok() || !channel_credentials.ok()) {
    spdlog::error("peer TLS: {}", (!server_credentials.ok() ? server_credentials.status()
                                                            : channel_credentials.status())
                                      .ToString());
    return kExitBadFlags;
  }
  std::shared_ptr<const zephon::checkpoint::PeerAuthenticator> peer_auth;
  if (!peer_secret_file.empty()) {
    auto loaded = zephon::checkpoint::PeerAuthenticator::FromFile(peer_secret_file);
    if (!loaded.ok()) {
      spdlog::error("{}", std::string(loaded.status().message()));
      return kExitBadFlags;
    }
    peer_auth = *std::move(loaded);
  }
  const bool mutual_tls = !peer_tls.ca_file.empty();
  if (peer_insecure && (peer_auth != nullptr || mutual_tls)) {
    spdlog::error("--peer-insecure contradicts --peer-secret-file / --peer-tls-ca: peers "
                  "are authenticated; drop --peer-insecure");
    return kExitBadFlags;
  }
  if (!peer_address.empty() && peer_auth == nullptr && !mutual_tls && !peer_insecure) {
    spdlog::error(
        "--peer-address={} would let anyone who reaches the port read this daemon's status "
        "and report into its checkpoint rounds. Authenticate peers with --peer-secret-file "
        "FILE (a secret shared by the cluster's daemons) or mutual TLS (--peer-tls-cert, "
        "--peer-tls-key and --peer-tls-ca), or accept it on a trusted network with "
        "--peer-insecure (see docs/deploy.md)",
        peer_address);
    return kExitBadFlags;
  }
  zephon::checkpoint::RoundAggregator aggregator;
  // Remote reports are held against the runs this daemon leads; bound to the registry
  // once it exists (it needs the peer port first).
  std::atomic<const zephon::daemon::InstanceRegistry*> led_runs{nullptr};
  zephon::checkpoint::PeerService peer_service(
      &aggregator, zephon::checkpoint::PeerServiceOptions{
                       peer_auth, [&led_runs](const std::string& run_id) {
                         const zephon::daemon::InstanceRegistry* registry = led_runs.load();
                         return registry == nullptr
                                    ? std::nullopt
                                    : registry->LedRun(run_id);
                       }});
  // Status for `zephonctl status --address host:port`, with the peer credentials.
  zephon::daemon::PeerStatusService peer_status_service(peer_auth);
  std::unique_ptr<grpc::Server> peer_server;
  if (!peer_address.empty()) {
    grpc::ServerBuilder peer_builder;
    zephon::ApplyPeerServerLimits(&peer_builder);  // results exceed 4 MiB; requests stay small
    int peer_port = 0;
    peer_builder.AddListeningPort(peer_address, *server_credentials, &peer_port);
    peer_builder.RegisterService(&peer_service);
    peer_builder.RegisterService(&peer_status_service);
    peer_server = peer_builder.BuildAndStart();
    if (peer_server == nullptr || peer_port == 0) {
      spdlog::error("cannot listen for peers on --peer-address={}", peer_address);
      return kExitEnvironment;
    }
    if (advertise_address.empty()) {
      std::string host = peer_address.substr(0, peer_address.rfind(':'));
      if (host == "0.0.0.0" || host == "[::]" || host.empty()) {
        char name[256] = {0};
        gethostname(name, sizeof(name) - 1);
        host = name;
      }
      advertise_address = host + ":" + std::to_string(peer_port);
    }
    options.peer_address = advertise_address;
    spdlog::get("peer")->info(
        "peer service (checkpoints, Status) bound to {} (advertised as {}; {})", peer_address,
        advertise_address,
        mutual_tls ? (peer_auth ? "mutual TLS + shared secret" : "mutual TLS")
                   : (peer_auth ? (peer_tls.enabled() ? "TLS + shared secret" : "shared secret")
                                : "INSECURE: no peer authentication"));
  } else {
    spdlog::get("peer")->info(
        "no peer service (no TCP port): checkpoint rounds of runs on this node only; runs "
        "spanning nodes need --peer-address");
  }
  options.daemon_label = socket_path;

  std::unique_ptr<zephon::metrics::MetricsServer> metrics_server;
  if (!metrics_address.empty()) {
    absl::StatusOr<std::unique_ptr<zephon::metrics::MetricsServer>> created =
        zephon::metrics::MetricsServer::Create(metrics_address);
    if (!created.ok()) {
      spdlog::get("metrics")->error("{}", created.status().ToString());
      return absl::IsInvalidArgument(created.status()) ? kExitBadFlags : kExitEnvironment;
    }
    metrics_server = *std::move(created);
    options.metrics_address = metrics_server->address();
  }

  zephon::daemon::InstanceRegistry registry(options);
  peer_status_service.Bind(&registry);
  led_runs.store(&registry);
  if (metrics_server != nullptr) {
    metrics_server->Start([&registry](const std::string& target) {
      return ServeHttp(target, registry);
    });
    spdlog::get("metrics")->info("metrics on http://{}/metrics (/healthz, /readyz)",
                                 metrics_server->address());
  }
  zephon::checkpoint::CheckpointRouter router(&aggregator, *channel_credentials, peer_auth);
  zephon::checkpoint::LocalRoundsOptions rounds_options;
  rounds_options.daemon_label = socket_path;
  rounds_options.roster = &registry;
  rounds_options.reporter = &router;
  rounds_options.counters = &zephon::metrics::DaemonCounters::Get();
  zephon::checkpoint::LocalRounds rounds(std::move(rounds_options));
  zephon::daemon::FdHandoffOptions handoff_options;
  handoff_options.socket_path = zephon::shm::HandoffSocketPath(socket_path);
  handoff_options.group = shm_group_id;
  absl::StatusOr<std::unique_ptr<zephon::daemon::FdHandoff>> handoff =
      zephon::daemon::FdHandoff::Start(handoff_options);
  if (!handoff.ok()) {
    spdlog::error("{}", handoff.status().ToString());
    return kExitEnvironment;
  }
  zephon::daemon::ZephonService service(&registry, &rounds, handoff->get());

  grpc::ServerBuilder builder;
  zephon::ApplyRpcMessageLimits(&builder);  // restores and checkpoints exceed 4 MiB
  builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    spdlog::error("cannot listen on unix socket {}", socket_path);
    return kExitEnvironment;
  }
  chmod(socket_path.c_str(), shm_group_id ? 0660 : 0600);
  if (shm_group_id && chown(socket_path.c_str(), static_cast<uid_t>(-1), *shm_group_id) != 0) {
    spdlog::error("cannot give socket {} to group {}: {}", socket_path, shm_group, std::strerror(errno));
    return kExitEnvironment;
  }
  signal(SIGTERM, OnSignal);
  signal(SIGINT, OnSignal);
  signal(SIGPIPE, SIG_IGN);
  spdlog::info("zephond {} listening on {} (shm prefix {}, idle exit {}, {} worker threads)",
               getpid(), socket_path, shm_prefix,
               idle_exit_s > 0 ? std::to_string(idle_exit_s) + " s" : "off", worker_threads);

  g_loop_tick_ms.store(NowMs());
  g_ready.store(true);
  // The timer: producer heartbeats, reservation expiry, idle exit.
  while (!g_stop.load()) {
    g_loop_tick_ms.store(NowMs());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    registry.Tick();
    if (idle_exit_s > 0 && absl::Now() - registry.idle_since() > absl::Seconds(idle_exit_s)) {
      spdlog::info("no readers for {} s; exiting", idle_exit_s);
      break;
    }
  }
  g_ready.store(false);
  spdlog::info("shutting down");
  // Order: refuse new work and close rings, then fail checkpoint rounds still open
  // (locally and for remote followers), so no handler keeps the servers waiting.
  registry.BeginShutdown();
  rounds.Shutdown();
  aggregator.Shutdown();
  // Rings are closed: readers drain them on their own, and the Attach streams only end
  // by cancellation, so do not wait long for them.
  // A follower still waiting on a remote leader may hold a handler until its round's
  // deadline; the servers get a bounded time, then the daemon exits without them.
  std::atomic<bool> servers_down{false};
  std::thread stopper([&] {
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    if (peer_server != nullptr) {
      peer_server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
    }
    servers_down.store(true);
  });
  for (int i = 0; i < 50 && !servers_down.load(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!servers_down.load()) {
    spdlog::warn("gRPC handlers still busy after 5 s (a checkpoint round waiting on its "
                 "leader); exiting without them");
    if (metrics_server != nullptr) metrics_server->Stop();
    registry.CloseAll();
    unlink(socket_path.c_str());
    unlink(zephon::shm::HandoffSocketPath(socket_path).c_str());
    spdlog::shutdown();
    _exit(0);
  }
  stopper.join();
  g_loop_tick_ms.store(0);
  if (metrics_server != nullptr) metrics_server->Stop();  // within ~100 ms
  registry.CloseAll();
  worker_pool->Shutdown();  // Runs what instances left queued (skipped: they are cancelled).
  unlink(socket_path.c_str());
  return 0;
}
