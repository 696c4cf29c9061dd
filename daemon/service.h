// The gRPC adapter of zephond's client-facing service: it only forwards to the
// InstanceRegistry and converts Status values. The Attach stream is the reader's lease:
// it stays open while the rank is attached, and its end without a detach message means
// the client process died.
//
// Thread-safety: thread-safe (gRPC calls it from its own threads).
#ifndef ZEPHON_DAEMON_SERVICE_H_
#define ZEPHON_DAEMON_SERVICE_H_

#include "daemon/instance_registry.h"
#include "proto/zephon.grpc.pb.h"

namespace zephon::daemon {

grpc::Status ToGrpcStatus(const absl::Status& status);

class ZephonService final : public proto::Zephon::Service {
 public:
  // `registry` must outlive the service.
  explicit ZephonService(InstanceRegistry* registry) : registry_(registry) {}

  grpc::Status Attach(
      grpc::ServerContext* context,
      grpc::ServerReaderWriter<proto::AttachServerMessage, proto::AttachClientMessage>* stream)
      override;
  grpc::Status Explain(grpc::ServerContext* context, const proto::ExplainRequest* request,
                       proto::ExplainReply* reply) override;
  grpc::Status Status(grpc::ServerContext* context, const proto::StatusRequest* request,
                      proto::StatusReply* reply) override;

 private:
  InstanceRegistry* const registry_;
};

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_SERVICE_H_
