// The gRPC adapter of zephond's client-facing service: it only forwards to the
// InstanceRegistry and converts Status values. The Attach stream is the reader's lease:
// it stays open while the rank is attached, and its end without a detach message means
// the client process died.
//
// Thread-safety: thread-safe (gRPC calls it from its own threads).
#ifndef ZEPHON_DAEMON_SERVICE_H_
#define ZEPHON_DAEMON_SERVICE_H_

#include "daemon/instance_registry.h"
#include "daemon/local_rounds.h"
#include "proto/zephon.grpc.pb.h"

namespace zephon::daemon {

grpc::Status ToGrpcStatus(const absl::Status& status);

class ZephonService final : public proto::Zephon::Service {
 public:
  // `registry` and `rounds` must outlive the service.
  ZephonService(InstanceRegistry* registry, LocalRounds* rounds)
      : registry_(registry), rounds_(rounds) {}

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
  InstanceRegistry* const registry_;
  LocalRounds* const rounds_;
};

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_SERVICE_H_
