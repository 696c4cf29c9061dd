// The gRPC adapter of zephond's client-facing service: it only forwards to the
// InstanceRegistry and converts Status values. The Attach stream is the reader's lease:
// it stays open while the rank is attached, and its end without a detach message means
// the client process died.
//
// Thread-safety: thread-safe (gRPC calls it from its own threads).
#ifndef ZEPHON_DAEMON_SERVICE_H_
#define ZEPHON_DAEMON_SERVICE_H_

#include <atomic>
#include <memory>

#include "common/env.h"
#include "daemon/attach_progress_reporter.h"
#include "daemon/checkpoint/local_rounds.h"
#include "daemon/checkpoint/peer_auth.h"
#include "daemon/checkpoint/refusal_log.h"
#include "daemon/fd_handoff.h"
#include "daemon/instance_registry.h"
#include "daemon/metrics/counters.h"
#include "proto/zephon.grpc.pb.h"

namespace zephon::daemon {

grpc::Status ToGrpcStatus(const absl::Status& status);

class ZephonService final : public proto::Zephon::Service {
 public:
  // `registry`, `rounds`, `handoff` and `counters` must outlive the service. `handoff`
  // hands each attached reader its ring descriptors; null only in tests that never map a
  // ring. `counters` (not null) counts attaches.
  // `env` (the rounds' clock) dates each checkpoint round's deadline.
  ZephonService(InstanceRegistry* registry, checkpoint::LocalRounds* rounds,
                FdHandoff* handoff, metrics::DaemonCounters* counters,
                Env* env = Env::Default())
      : registry_(registry), rounds_(rounds), handoff_(handoff), counters_(counters),
        env_(env),
        progress_(&registry->conversions(), kAttachProgressInterval,
                  [registry] { return registry->DownloadedBytes(); }) {}

  grpc::Status Attach(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::AttachServerMessage, proto::AttachClientMessage>* stream)
      override;
  grpc::Status Checkpoint(grpc::ServerContext* context, const proto::CheckpointRequest* request,
                          proto::CheckpointResult* reply) override;
  grpc::Status Explain(grpc::ServerContext* context, const proto::ExplainRequest* request,
                       proto::ExplainReply* reply) override;
  grpc::Status Status(grpc::ServerContext* context, const proto::StatusRequest* request,
                      proto::StatusReply* reply) override;

 private:
  // Registers the attached reader's ring descriptors with the hand-off; returns the token.
  absl::StatusOr<std::string> OfferRing(const Attachment& attachment,
                                        const proto::AttachRequest& request);

  InstanceRegistry* const registry_;
  checkpoint::LocalRounds* const rounds_;
  FdHandoff* const handoff_;
  metrics::DaemonCounters* const counters_;
  Env* const env_;
  AttachProgressReporter progress_;  // reports attaches that asked for progress
};

// The Status RPC alone, for the TCP peer server: `zephonctl status --address host:port`
// asks a peer daemon with the peer credentials (and, with a PeerAuthenticator, a signed
// call). Every other RPC answers UNIMPLEMENTED. The registry is bound after the peer
// server starts (the registry needs its port); until then Status answers UNAVAILABLE.
// The answer is RedactForPeers(): what an operator needs, not what would help an
// attacker on the node.
class PeerStatusService final : public proto::Zephon::Service {
 public:
  // `auth` null: calls are not signed (mutual TLS or --peer-insecure decide).
  explicit PeerStatusService(std::shared_ptr<const checkpoint::PeerAuthenticator> auth = nullptr)
      : auth_(std::move(auth)) {}
  // REQUIRES: `registry` outlives the service's server.
  void Bind(const InstanceRegistry* registry) { registry_.store(registry); }

  grpc::Status Status(grpc::ServerContext* context, const proto::StatusRequest* request,
                      proto::StatusReply* reply) override;

 private:
  const std::shared_ptr<const checkpoint::PeerAuthenticator> auth_;
  std::atomic<const InstanceRegistry*> registry_{nullptr};
  checkpoint::RefusalLog refusals_;
};

// The daemon's status as served over the network: process ids (daemon and readers),
// local paths (socket, shm prefix, ring names, cache directory) and spec hashes are
// cleared; runs, instances, ranks, lag, fill, rates and cache counters stay.
proto::StatusReply RedactForPeers(proto::StatusReply reply);

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_SERVICE_H_
