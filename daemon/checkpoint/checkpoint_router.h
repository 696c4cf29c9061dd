// CheckpointRouter: zephond's LeaderReporter; delivers a daemon's pre-merged report to
// its run's leader.
//
// The daemon hosting global_rank 0 leads: its report goes straight to the in-process
// RoundAggregator. Every other daemon finds the leader through the rank option
// `leader_address` or the rendezvous file aggregate_dir/<run_id>/leader (waiting for it
// to appear until the deadline; aggregate_dir may be a directory or s3://), and reports
// over the peer gRPC service. One gRPC channel per leader address is kept and reused, so a
// round costs one RPC, not a connection setup.
//
// A report sent while this daemon does not lead may find that it leads after all: rank 0
// of the run attaches here while the report waits for the rendezvous file (ranks need
// no barrier between attach and checkpoint()). The leader file then names this daemon
// (by its per-process instance id, AggregateDir's LeaderRecord) before rank 0 is
// registered: the router keeps polling until `leads_run` says this daemon leads, then
// hands the report to the in-process aggregator. A file naming another daemon that
// serves no peers fails at once with the fix. Thread-safe.
#ifndef ZEPHON_DAEMON_CHECKPOINT_CHECKPOINT_ROUTER_H_
#define ZEPHON_DAEMON_CHECKPOINT_CHECKPOINT_ROUTER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "daemon/checkpoint/aggregate_dir.h"
#include "daemon/checkpoint/leader_reporter.h"
#include "daemon/checkpoint/peer_service.h"
#include "daemon/checkpoint/round_aggregator.h"
#include "daemon/storage/s3_store.h"
#include "proto/checkpoint.pb.h"

namespace zephon::checkpoint {

class CheckpointRouter final : public LeaderReporter {
 public:
  // `aggregator` must outlive the router. `s3` is where s3:// aggregate_dirs connect
  // (--s3-* flags). `auth` (null: unsigned) signs every report to a remote leader with
  // the cluster's --peer-secret-file. Deadlines are on `env`'s clock (the aggregator's),
  // its pauses between polls are env->SleepFor, and aggregate_dirs are opened through
  // it; `env` must outlive the router.
  // `leads_run(run_id)` (null: never) says whether global_rank 0 of the run is attached
  // here now; `own_address` is the peer address this daemon writes to rendezvous files
  // (empty: it serves no peers), `own_instance` the instance id it writes there
  // (empty: match by address only) and `own_label` its label (with the host name, it
  // recognizes a file of an earlier process of this daemon, which rank 0's attach here
  // will rewrite: the report waits instead of failing).
  CheckpointRouter(RoundAggregator* aggregator,
                   std::shared_ptr<grpc::ChannelCredentials> peer_credentials,
                   storage::S3Options s3, std::shared_ptr<const PeerAuthenticator> auth = nullptr,
                   Env* env = Env::Default(),
                   std::function<bool(const std::string&)> leads_run = nullptr,
                   std::string own_address = "", std::string own_instance = "",
                   std::string own_label = "")
      : aggregator_(aggregator),
        credentials_(std::move(peer_credentials)),
        s3_(std::move(s3)),
        auth_(std::move(auth)),
        env_(env),
        leads_run_(std::move(leads_run)),
        own_address_(std::move(own_address)),
        own_instance_(std::move(own_instance)),
        own_label_(std::move(own_label)),
        own_host_(LocalHostName()) {}

  absl::StatusOr<proto::CheckpointResult> Submit(const proto::CheckpointReport& report,
                                                 const LeaderRoute& route, bool leads,
                                                 absl::Time deadline) const override
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Whether the leader file `leader` was written by this daemon.
  bool NamesThisDaemon(const LeaderRecord& leader) const;

  // The leader's address: the explicit option, else the rendezvous file (polled until it
  // exists or the deadline; a store error that waiting cannot fix is returned at once;
  // while the store is unreachable, the address last read for the run).
  // `not_this` skips an address already found dead. An empty address: this daemon
  // leads now (see the class comment).
  absl::StatusOr<std::string> FindLeader(const LeaderRoute& route, absl::Time deadline,
                                         const std::string& not_this) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // The cached client for `address` (created on first use).
  absl::StatusOr<std::shared_ptr<const PeerClient>> ClientFor(
      const std::string& address) const ABSL_LOCKS_EXCLUDED(mu_);

  RoundAggregator* const aggregator_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  const storage::S3Options s3_;
  const std::shared_ptr<const PeerAuthenticator> auth_;
  Env* const env_;
  const std::function<bool(const std::string&)> leads_run_;
  const std::string own_address_;
  const std::string own_instance_;
  const std::string own_label_;  // The label it writes (daemon=)
  const std::string own_host_;
  mutable absl::Mutex mu_;
  mutable std::map<std::string, std::shared_ptr<const PeerClient>> clients_
      ABSL_GUARDED_BY(mu_);
  // aggregate_dir + "\n" + run_id -> the leader address last read from its rendezvous
  // file; used only while the store cannot be read.
  mutable std::map<std::string, std::string> known_leaders_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_CHECKPOINT_ROUTER_H_
