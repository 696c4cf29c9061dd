// DaemonFlags: every zephond command-line flag (and --config file key), parsed with
// CLI11 into one struct, and the checks that need no side effects.
//
// The defaults are the member initializers; AddDaemonFlags binds each flag to its
// member under the name, help text and check users know. ValidateDaemonFlags runs
// before anything is created (directories, logs, sockets).
//
// Thread-safety: plain data and free functions; thread-compatible.
#ifndef ZEPHON_DAEMON_DAEMON_FLAGS_H_
#define ZEPHON_DAEMON_DAEMON_FLAGS_H_

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/checkpoint/peer_credentials.h"
#include "daemon/storage/s3_flags.h"

namespace zephon::daemon {

struct DaemonFlags {
  // Clients and rings.
  std::string socket_path;  // default: DefaultSocketPath()
  std::string shm_prefix;   // default: DefaultShmPrefix(socket_path), filled by Daemon
  std::string shm_mode_text = "0600";  // ignored since ring layout 2; warned about
  std::string shm_group;
  uint64_t max_ring_bytes = 0;
  double idle_exit_s = 0;
  uint32_t prefetch_batches = 8;
  uint32_t worker_threads = 0;  // default: exec::DefaultWorkerThreads()
  // Peers (checkpoint rounds of runs spanning nodes).
  std::string peer_address;
  std::string advertise_address;
  checkpoint::PeerTlsOptions peer_tls;
  std::string peer_secret_file;
  bool peer_insecure = false;
  // Datasets.
  std::string cache_dir;
  // Audit every instance's batches into <audit_dir>/<run>/ (empty = only instances
  // whose ranks ask, audit=True, into <aggregate_dir>/<run>/audit).
  std::string audit_dir;
  uint64_t max_jsonl_line_bytes = 0;  // default: pipeline::kDefaultMaxLineBytes
  uint64_t token_cache_bytes = uint64_t{64} << 30;
  uint64_t shard_cache_bytes = uint64_t{16} << 30;
  uint64_t shard_cache_block_bytes = uint64_t{8} << 20;
  storage::S3Flags s3;
  // Operations.
  std::string log_file;
  std::string log_level = "info";
  std::string metrics_address = "127.0.0.1:0";

  // The defaults that depend on the machine (socket path, worker threads, ...).
  static DaemonFlags Defaults();
};

// Registers every zephond flag, the --config option and the help footer on `app`,
// bound to `flags` (whose current values are the defaults shown). `flags` must outlive
// the parse.
void AddDaemonFlags(CLI::App& app, DaemonFlags* flags);

// Checks across flags and against the system that CLI11 cannot express. Every error is
// INVALID_ARGUMENT naming the flag and the fix: an unknown --shm-group, a --shm-mode
// that is not octal, --peer-insecure with peer authentication, or --peer-address
// without any.
absl::Status ValidateDaemonFlags(const DaemonFlags& flags);

// The group id of --shm-group; nullopt when the flag is empty. INVALID_ARGUMENT when the
// group does not exist.
absl::StatusOr<std::optional<gid_t>> ShmGroupId(const DaemonFlags& flags);

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_DAEMON_FLAGS_H_
