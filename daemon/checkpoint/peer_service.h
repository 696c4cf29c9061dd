// The ZephonPeer transport: PeerService serves a leader's RoundAggregator to the other
// daemons of its runs; PeerClient is how a daemon reports to a run's leader.
//
// PeerService only forwards: the caller's gRPC deadline (capped at the report's
// aggregate_timeout_s + 60 s) becomes the Submit deadline, and a cancelled call (the
// reporting daemon died or gave up) is seen within RoundAggregatorOptions::poll_interval.
// Errors travel with their code and message unchanged, so remote and local submitters
// read the same text.
//
// Thread-safety: both classes are thread-safe. PeerService blocks one gRPC handler
// thread per waiting report: before shutting the server down, call
// RoundAggregator::Shutdown() (or give Server::Shutdown a deadline) so they return.
#ifndef ZEPHON_DAEMON_CHECKPOINT_PEER_SERVICE_H_
#define ZEPHON_DAEMON_CHECKPOINT_PEER_SERVICE_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/checkpoint/round_aggregator.h"
#include "proto/checkpoint.grpc.pb.h"
#include "proto/checkpoint.pb.h"

namespace zephon::checkpoint {

class PeerService final : public proto::ZephonPeer::Service {
 public:
  // `aggregator` must outlive the service (and the server it is registered with).
  explicit PeerService(RoundAggregator* aggregator) : aggregator_(aggregator) {}

  grpc::Status Report(grpc::ServerContext* context, const proto::CheckpointReport* request,
                      proto::CheckpointResult* response) override;

 private:
  RoundAggregator* const aggregator_;
};

class PeerClient {
 public:
  // A client for the leader at `address` (host:port). Does not contact the leader (the
  // channel connects on the first Report). `credentials` null = plaintext.
  // INVALID_ARGUMENT for an empty address or one containing whitespace.
  static absl::StatusOr<std::unique_ptr<PeerClient>> Connect(
      const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials);

  PeerClient(const PeerClient&) = delete;
  PeerClient& operator=(const PeerClient&) = delete;

  // Sends `report` and waits for the round's outcome until `deadline`. Errors:
  //   UNAVAILABLE "leader zephond at <address> unreachable: ..." when the leader cannot
  //     be reached, refuses the connection (TLS), dies or shuts down mid-round (the
  //     caller may look for a new leader);
  //   DEADLINE_EXCEEDED naming the leader when it did not answer before `deadline`;
  //   otherwise the leader's own error for the round, unchanged.
  absl::StatusOr<proto::CheckpointResult> Report(const proto::CheckpointReport& report,
                                                 absl::Time deadline) const;

  const std::string& address() const { return address_; }

 private:
  PeerClient(std::string address, std::shared_ptr<grpc::Channel> channel);

  const std::string address_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<proto::ZephonPeer::Stub> stub_;
};

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_PEER_SERVICE_H_
