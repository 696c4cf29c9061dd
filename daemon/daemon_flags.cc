#include "daemon/daemon_flags.h"

#include <grp.h>

#include <exception>

#include "absl/strings/str_cat.h"
#include "common/paths.h"
#include "daemon/exec/worker_pool.h"
#include "daemon/pipeline/formats/jsonl_reader.h"

namespace zephon::daemon {

DaemonFlags DaemonFlags::Defaults() {
  DaemonFlags flags;
  flags.socket_path = DefaultSocketPath();
  flags.worker_threads = exec::DefaultWorkerThreads();
  flags.max_jsonl_line_bytes = pipeline::kDefaultMaxLineBytes;
  return flags;
}

void AddDaemonFlags(CLI::App& app, DaemonFlags* flags) {
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
  app.add_option("--socket", flags->socket_path, "Unix domain socket to serve clients on")
      ->capture_default_str();
  app.add_option("--shm-prefix", flags->shm_prefix,
                 "Prefix of this daemon's ring memfd names, and of the legacy /dev/shm "
                 "segments swept at start (default: zephon.<uid>.<socket hash>)");
  app.add_option("--shm-mode", flags->shm_mode_text,
                 "Ignored since ring layout 2 (rings are memfds handed over the socket; "
                 "access follows the socket's mode and --shm-group)")
      ->capture_default_str();
  app.add_option("--shm-group", flags->shm_group,
                 "Group that owns the socket and the ring hand-off socket (mode becomes "
                 "0660) and whose members may claim rings; for trainer ranks running as "
                 "another user of that group");
  app.add_option("--max-ring-bytes", flags->max_ring_bytes,
                 "Budget for the bytes of all rings together (0 = no budget beyond the "
                 "memory limit of zephond's cgroup)")
      ->capture_default_str();
  app.add_option("--idle-exit-s", flags->idle_exit_s,
                 "Exit after this many seconds without attached readers (0 = never)")
      ->capture_default_str();
  app.add_option("--prefetch-batches", flags->prefetch_batches,
                 "Default ring slots per instance")
      ->capture_default_str();
  app.add_option("--peer-address", flags->peer_address,
                 "host:port of the daemon-to-daemon service (checkpoint rounds of runs "
                 "spanning nodes, and `zephonctl status --address`); empty (the default) = "
                 "no TCP port at all: runs whose ranks are all on this node checkpoint over "
                 "the Unix socket. Needs peer authentication: --peer-tls-cert/-key/-ca "
                 "(mutual TLS), --peer-secret-file, or --peer-insecure");
  app.add_option("--advertise-address", flags->advertise_address,
                 "host:port peers use to reach this daemon (default: --peer-address with "
                 "the bound port; the hostname when it binds 0.0.0.0)");
  app.add_option("--peer-tls-cert", flags->peer_tls.cert_file,
                 "PEM certificate for peer traffic");
  app.add_option("--peer-tls-key", flags->peer_tls.key_file, "PEM private key for peer traffic");
  app.add_option("--peer-tls-ca", flags->peer_tls.ca_file,
                 "PEM CA bundle: verify peers with it (mutual TLS)");
  app.add_option("--peer-secret-file", flags->peer_secret_file,
                 "File holding a secret shared by every zephond of the cluster (32+ bytes, "
                 "mode 0400, e.g. a Kubernetes Secret): peer calls are signed with it "
                 "(HMAC-SHA256) and unsigned ones refused");
  app.add_flag("--peer-insecure", flags->peer_insecure,
               "Serve --peer-address without authentication: anyone who can reach the port "
               "can read status and take part in checkpoint rounds. Trusted networks only");
  app.add_option("--cache-dir", flags->cache_dir,
                 "Directory for converted dataset shards (JSONL token caches) and, under "
                 "objects/, the shard cache of s3:// datasets; default "
                 "$XDG_CACHE_HOME/zephon or ~/.cache/zephon");
  app.add_option("--audit-dir", flags->audit_dir,
                 "Append a record of every batch each instance publishes (lane, lane "
                 "batch, SHA-256 of its tokens, sample ids) to an audit log under "
                 "DIR/<run>/, for `zephonctl audit diff/verify`; default: only runs whose "
                 "ranks set audit=True, under <aggregate_dir>/<run>/audit");
  app.add_option("--max-jsonl-line-bytes", flags->max_jsonl_line_bytes,
                 "Longest line (decompressed bytes) of a JSONL dataset file; a longer line "
                 "fails that dataset naming the file and line instead of being buffered "
                 "whole (a 1 MB .jsonl.gz can hold a 1 GiB line)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--token-cache-bytes", flags->token_cache_bytes,
                 "Disk budget of the node's token cache (the converted JSONL shards in "
                 "<cache-dir>, shared by all instances, runs and restarts; least recently "
                 "used entries are evicted, entries of open datasets are kept). 0 = no "
                 "budget")
      ->capture_default_str();
  app.add_option("--shard-cache-bytes", flags->shard_cache_bytes,
                 "Disk budget of the node's cache of s3:// dataset bytes (<cache-dir>/objects, "
                 "shared by all instances; least recently used blocks are evicted, blocks "
                 "being read are kept). 0 = no disk cache: blocks are held in memory only "
                 "while read, plus a 64 MiB LRU")
      ->capture_default_str();
  app.add_option("--shard-cache-block-bytes", flags->shard_cache_block_bytes,
                 "Ranged-GET block size of s3:// dataset objects; objects up to this size are "
                 "fetched whole (one GET)")
      ->capture_default_str()
      ->check(CLI::Range(uint64_t{4096}, uint64_t{1} << 30));
  storage::AddS3Flags(app, &flags->s3);
  app.add_option("--worker-threads", flags->worker_threads,
                 "Threads of the one worker pool shared by all instances (the node-wide "
                 "thread budget for reading batches; 0 = each instance reads on its "
                 "producer thread). Default: half the cores")
      ->capture_default_str();
  app.add_option("--log-file", flags->log_file, "Log to this file instead of stderr");
  app.add_option("--log-level", flags->log_level,
                 "trace, debug, info, warn, error, critical, off")
      ->capture_default_str()
      ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));
  app.add_option("--metrics-address", flags->metrics_address,
                 "host:port of the Prometheus endpoint (/metrics, /healthz, /readyz); port 0 "
                 "= any free port (see the log or `status`); empty disables it")
      ->capture_default_str();
}

absl::StatusOr<std::optional<gid_t>> ShmGroupId(const DaemonFlags& flags) {
  if (flags.shm_group.empty()) return std::nullopt;
  const struct group* gr = getgrnam(flags.shm_group.c_str());
  if (gr == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("--shm-group=", flags.shm_group, ": no such group (create it with `groupadd ",
                     flags.shm_group, "` or drop the flag)"));
  }
  return gr->gr_gid;
}

absl::Status ValidateDaemonFlags(const DaemonFlags& flags) {
  // Checked before anything is created, so an unknown group never leaves a 0700
  // directory behind that later runs (with the group fixed) would have to repair.
  if (absl::StatusOr<std::optional<gid_t>> gid = ShmGroupId(flags); !gid.ok()) {
    return gid.status();
  }
  try {
    (void)std::stoul(flags.shm_mode_text, nullptr, 8);
  } catch (const std::exception&) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--shm-mode=", flags.shm_mode_text, " is not an octal permission (e.g. 0600)"));
  }
  const bool secret = !flags.peer_secret_file.empty();
  const bool mutual_tls = !flags.peer_tls.ca_file.empty();
  if (flags.peer_insecure && (secret || mutual_tls)) {
    return absl::InvalidArgumentError(
        "--peer-insecure contradicts --peer-secret-file / --peer-tls-ca: peers are "
        "authenticated; drop --peer-insecure");
  }
  if (!flags.peer_address.empty() && !secret && !mutual_tls && !flags.peer_insecure) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--peer-address=", flags.peer_address,
        " would let anyone who reaches the port read this daemon's status and report into "
        "its checkpoint rounds. Authenticate peers with --peer-secret-file FILE (a secret "
        "shared by the cluster's daemons) or mutual TLS (--peer-tls-cert, --peer-tls-key "
        "and --peer-tls-ca), or accept it on a trusted network with --peer-insecure (see "
        "docs/deploy.md)"));
  }
  return absl::OkStatus();
}

}  // namespace zephon::daemon
