#include "daemon/service.h"

#include <spdlog/spdlog.h>

namespace zephon::daemon {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

grpc::Status ZephonService::Attach(
    grpc::ServerContext* context,
    grpc::ServerReaderWriter<proto::AttachServerMessage, proto::AttachClientMessage>* stream) {
  proto::AttachClientMessage first;
  if (!stream->Read(&first) || !first.has_attach()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message of Attach must carry an AttachRequest");
  }
  absl::StatusOr<Attachment> attachment = registry_->Attach(first.attach());
  if (!attachment.ok()) {
    spdlog::warn("attach refused (pid {}): {}", first.attach().client_pid(),
                 attachment.status().ToString());
    return ToGrpcStatus(attachment.status());
  }
  proto::AttachServerMessage reply;
  *reply.mutable_attached() = attachment->reply;
  // A client that gave up before it got the reply never read a batch: detach it
  // cleanly rather than blame it on its peers.
  bool clean = true;
  if (stream->Write(reply)) {
    clean = false;
    proto::AttachClientMessage message;
    while (stream->Read(&message)) {
      if (message.has_detach()) {
        clean = true;
        break;
      }
    }
  }
  registry_->Detach(*attachment, /*died=*/!clean);
  return grpc::Status::OK;
}

grpc::Status ZephonService::Explain(grpc::ServerContext*, const proto::ExplainRequest* request,
                                    proto::ExplainReply* reply) {
  absl::StatusOr<std::string> text = registry_->Explain(request->instance_id());
  if (!text.ok()) return ToGrpcStatus(text.status());
  reply->set_text(*text);
  return grpc::Status::OK;
}

grpc::Status ZephonService::Status(grpc::ServerContext*, const proto::StatusRequest*,
                                   proto::StatusReply* reply) {
  *reply = registry_->Status();
  return grpc::Status::OK;
}

}  // namespace zephon::daemon
