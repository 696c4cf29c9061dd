// CheckpointRouter: delivers a daemon's pre-merged report to its run's leader.
//
// The daemon hosting global_rank 0 leads: its report goes straight to the in-process
// RoundAggregator. Every other daemon finds the leader through the rank option
// `leader_address` or the rendezvous file aggregate_dir/<run_id>/leader (waiting for it
// to appear until the deadline), and reports over the peer gRPC service. Thread-safe.
#ifndef ZEPHON_DAEMON_CHECKPOINT_ROUTER_H_
#define ZEPHON_DAEMON_CHECKPOINT_ROUTER_H_

#include <memory>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/checkpoint/round_aggregator.h"
#include "daemon/identity.h"
#include "proto/checkpoint.pb.h"

namespace zephon::daemon {

class CheckpointRouter {
 public:
  // `aggregator` must outlive the router.
  CheckpointRouter(checkpoint::RoundAggregator* aggregator,
                   std::shared_ptr<grpc::ChannelCredentials> peer_credentials)
      : aggregator_(aggregator), credentials_(std::move(peer_credentials)) {}

  absl::StatusOr<proto::CheckpointResult> Submit(const proto::CheckpointReport& report,
                                                 const RankIdentity& identity, bool leads,
                                                 absl::Time deadline) const;

 private:
  // The leader's address: the explicit option, else the rendezvous file (polled until it
  // exists or the deadline). `not_this` skips an address already found dead.
  absl::StatusOr<std::string> FindLeader(const RankIdentity& identity, absl::Time deadline,
                                         const std::string& not_this) const;

  checkpoint::RoundAggregator* const aggregator_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
};

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_CHECKPOINT_ROUTER_H_
