#include "client/daemon_queries.h"

#include "client/connection.h"
#include "proto/zephon.grpc.pb.h"

namespace zephon::client {
namespace {

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
}

}  // namespace

absl::StatusOr<std::string> Explain(const std::shared_ptr<grpc::Channel>& channel,
                                    const std::string& instance_id, absl::Duration timeout) {
  auto stub = proto::Zephon::NewStub(channel);
  proto::ExplainRequest request;
  request.set_instance_id(instance_id);
  proto::ExplainReply reply;
  grpc::ClientContext context;
  SetDeadline(&context, timeout);
  if (absl::Status s = FromGrpc(stub->Explain(&context, request, &reply)); !s.ok()) return s;
  return reply.text();
}

absl::StatusOr<proto::StatusReply> DaemonStatus(const std::shared_ptr<grpc::Channel>& channel,
                                                absl::Duration timeout) {
  auto stub = proto::Zephon::NewStub(channel);
  proto::StatusReply reply;
  grpc::ClientContext context;
  SetDeadline(&context, timeout);
  if (absl::Status s = FromGrpc(stub->Status(&context, proto::StatusRequest(), &reply));
      !s.ok()) {
    return s;
  }
  return reply;
}

}  // namespace zephon::client
