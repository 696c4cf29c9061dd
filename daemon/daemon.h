// Daemon: one zephond process, from Start to exit.
//
// Start (each step needs the ones before it): the socket's private directory, the log
// sink and loggers, the per-socket lock, the sweep of legacy /dev/shm segments (no live
// owner can exist once the lock is held), the shard cache, the S3 defaults, the worker
// pool, the peer credentials and peer server (the registry needs its port), the metrics
// endpoint, the registry, checkpoint rounds, the ring hand-off socket ("<socket>.fds")
// and the client gRPC server on the socket; then the signal handlers.
//
// Shutdown order (Shutdown() is the only place that tears down; the destructor calls it):
//   1. /readyz turns 503; the registry refuses new work and closes every ring;
//   2. local rounds and the leader's aggregator fail every open checkpoint round, so no
//      gRPC handler keeps waiting on one;
//   3. the client and peer gRPC servers stop (200 ms grace for Attach streams). A
//      follower may still wait on a remote leader: after 5 s the process logs it and
//      exits (status 0) without them, after steps 4-5 and unlinking the sockets;
//   4. /healthz turns 503; the metrics endpoint stops;
//   5. the registry closes every instance, then the worker pool runs what they left
//      queued (skipped: cancelled); the socket is unlinked. The lock goes last, with
//      the object.
//
// Thread-safety: single-owner. main() calls Start, Run and Shutdown on one thread.
#ifndef ZEPHON_DAEMON_DAEMON_H_
#define ZEPHON_DAEMON_DAEMON_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "daemon/audit/step_merge.h"
#include "daemon/checkpoint/checkpoint_router.h"
#include "daemon/checkpoint/local_rounds.h"
#include "daemon/checkpoint/peer_service.h"
#include "daemon/checkpoint/round_aggregator.h"
#include "daemon/daemon_flags.h"
#include "daemon/daemon_lock.h"
#include "daemon/exec/worker_pool.h"
#include "daemon/fd_handoff.h"
#include "daemon/instance_registry.h"
#include "daemon/metrics/counters.h"
#include "daemon/metrics/endpoint.h"
#include "daemon/service.h"

namespace zephon::daemon {

// zephond's exit codes.
inline constexpr int kExitClean = 0;
inline constexpr int kExitBadFlags = 2;
inline constexpr int kExitLockHeld = 3;
inline constexpr int kExitEnvironment = 4;

// The exit code for an error of ValidateDaemonFlags or Daemon::Start: INVALID_ARGUMENT
// is a bad flag, ALREADY_EXISTS another zephond holding the socket, anything else the
// environment.
int ExitCodeFor(const absl::Status& status);

class Daemon {
 public:
  // Starts every server (see the order above) and logs why when it cannot; the error's
  // code gives the exit code (ExitCodeFor). REQUIRES: `flags` passed
  // ValidateDaemonFlags; called once per process (it installs the loggers and signal
  // handlers). `env` is the one clock, file system and memfd factory of every component
  // (Env::Default() in zephond; a test's FakeEnv); it must outlive the Daemon.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(DaemonFlags flags,
                                                       Env* env = Env::Default());
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // The main loop: producer heartbeats and reservation expiry every 100 ms, until
  // SIGTERM/SIGINT or --idle-exit-s without readers.
  void Run();

  // See the shutdown order above. Idempotent. May not return (step 3's exit).
  void Shutdown();

 private:
  Daemon(DaemonFlags flags, Env* env) : flags_(std::move(flags)), env_(env) {}

  // Start's steps after the lock and the sweep; errors as Start's.
  absl::Status StartServers();
  // The peer server on --peer-address; sets the advertised address.
  absl::Status StartPeerServer(const std::shared_ptr<grpc::ServerCredentials>& credentials,
                               const std::shared_ptr<const checkpoint::PeerAuthenticator>& auth,
                               RegistryOptions* options);
  // The client server on the Unix socket, with its mode and group.
  absl::Status StartClientServer();
  // Last steps of the shutdown when the gRPC servers are stuck; does not return.
  [[noreturn]] void ExitWithoutServers();

  DaemonFlags flags_;
  Env* const env_;
  std::optional<gid_t> shm_group_id_;
  bool shut_down_ = false;

  // Declared in start order: members are destroyed in reverse, after Shutdown().
  std::unique_ptr<DaemonLock> lock_;
  const std::shared_ptr<metrics::DaemonCounters> counters_ =
      std::make_shared<metrics::DaemonCounters>();
  metrics::Health health_;
  std::shared_ptr<exec::WorkerPool> worker_pool_;
  // Merges audited runs' logs per lane round at each completed checkpoint round; its
  // aggregator callback holds it, so it is declared (and outlives) before the aggregator.
  std::unique_ptr<audit::StepMerger> step_merger_;
  // Created once the --s3-* flags are parsed (an s3:// aggregate_dir connects with them).
  std::unique_ptr<checkpoint::RoundAggregator> aggregator_;
  // The registry remote reports are held against; set once it exists (it needs the
  // peer port first). Read by peer handler threads.
  std::atomic<const InstanceRegistry*> led_runs_{nullptr};
  std::unique_ptr<checkpoint::PeerService> peer_service_;
  std::unique_ptr<PeerStatusService> peer_status_service_;
  std::unique_ptr<grpc::Server> peer_server_;
  std::unique_ptr<metrics::MetricsEndpoint> metrics_;
  std::unique_ptr<InstanceRegistry> registry_;
  std::unique_ptr<checkpoint::CheckpointRouter> router_;
  std::unique_ptr<checkpoint::LocalRounds> rounds_;
  std::unique_ptr<FdHandoff> handoff_;
  std::unique_ptr<ZephonService> service_;
  std::unique_ptr<grpc::Server> server_;
};

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_DAEMON_H_
