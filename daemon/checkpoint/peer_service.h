// The ZephonPeer transport: PeerService serves a leader's RoundAggregator to the other
// daemons of its runs; PeerClient is how a daemon reports to a run's leader.
//
// PeerService trusts nothing on the wire. Before a report reaches the aggregator:
//   - with a PeerAuthenticator, the call must be signed with the cluster's secret
//     (UNAUTHENTICATED otherwise; without one, mutual TLS or --peer-insecure is the
//     operator's choice of trust);
//   - the run must be one this daemon leads (its global_rank 0 is attached here), and the
//     report's world_size, canonical_replicas, spec_hash and aggregate_dir must equal that
//     run's as its local ranks attached it (FAILED_PRECONDITION otherwise): the leader never
//     takes a location to write to from the wire;
//   - every rank must be < world_size (RoundState refuses a rank reported twice).
// Refusals are logged with the caller's address (RefusalLog: escaped, rate-limited).
// Then it only forwards: the caller's gRPC deadline (capped at the report's
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

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "daemon/checkpoint/led_run.h"
#include "daemon/checkpoint/peer_auth.h"
#include "daemon/checkpoint/refusal_log.h"
#include "daemon/checkpoint/round_aggregator.h"
#include "proto/checkpoint.grpc.pb.h"
#include "proto/checkpoint.pb.h"

namespace zephon::checkpoint {

struct PeerServiceOptions {
  // Null: calls are not signed (mutual TLS or --peer-insecure decide who may connect).
  std::shared_ptr<const PeerAuthenticator> auth;
  // The run `run_id` as this daemon leads it; nullopt when it does not lead it.
  std::function<std::optional<LedRun>(const std::string& run_id)> led_run;
  // The clock of Submit deadlines and refusal rate limits: the aggregator's (pass the
  // same Env to both). Must outlive the service.
  Env* env = Env::Default();
};

class PeerService final : public proto::ZephonPeer::Service {
 public:
  // `aggregator` must outlive the service (and the server it is registered with).
  PeerService(RoundAggregator* aggregator, PeerServiceOptions options)
      : aggregator_(aggregator),
        options_(std::move(options)),
        refusals_(absl::Seconds(1), options_.env) {}

  grpc::Status Report(grpc::ServerContext* context, const proto::CheckpointReport* request,
                      proto::CheckpointResult* response) override;

 private:
  // OK when `report` belongs to a run this daemon leads and agrees with it.
  absl::Status CheckAgainstLedRun(const proto::CheckpointReport& report) const;

  RoundAggregator* const aggregator_;
  const PeerServiceOptions options_;
  RefusalLog refusals_;
};

class PeerClient {
 public:
  // A client for the leader at `address` (host:port). Does not contact the leader (the
  // channel connects on the first Report). `credentials` null = plaintext; `auth` non-null
  // signs every report and checks the leader's signed answer.
  // INVALID_ARGUMENT for an empty address or one containing whitespace.
  static absl::StatusOr<std::unique_ptr<PeerClient>> Connect(
      const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials,
      std::shared_ptr<const PeerAuthenticator> auth = nullptr);

  PeerClient(const PeerClient&) = delete;
  PeerClient& operator=(const PeerClient&) = delete;

  // Sends `report` and waits for the round's outcome until `deadline`. Errors:
  //   UNAVAILABLE "leader zephond at <address> unreachable: ..." when the leader cannot
  //     be reached, refuses the connection (TLS), dies or shuts down mid-round (the
  //     caller may look for a new leader);
  //   DEADLINE_EXCEEDED naming the leader when it did not answer before `deadline`;
  //   UNAUTHENTICATED when the leader refused our signature or its answer is unsigned;
  //   otherwise the leader's own error for the round, unchanged.
  absl::StatusOr<proto::CheckpointResult> Report(const proto::CheckpointReport& report,
                                                 absl::Time deadline) const;

  const std::string& address() const { return address_; }

 private:
  PeerClient(std::string address, std::shared_ptr<grpc::Channel> channel,
             std::shared_ptr<const PeerAuthenticator> auth);

  const std::string address_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::shared_ptr<const PeerAuthenticator> auth_;
  const std::unique_ptr<proto::ZephonPeer::Stub> stub_;
};

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_PEER_SERVICE_H_
