#include "daemon/service.h"

#include <algorithm>
#include <memory>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "daemon/metrics/counters.h"

namespace zephon::daemon {
namespace {

std::shared_ptr<spdlog::logger> Log() { return SubsystemLogger("rpc"); }

// The instance as a checkpoint round reports it (the identity is its first rank's).
std::shared_ptr<const checkpoint::RoundInstance> RoundInstanceOf(
    std::shared_ptr<PipelineInstance> instance) {
  const InstanceConfig& config = instance->config();
  auto out = std::make_shared<checkpoint::RoundInstance>();
  out->instance_id = config.instance_id;
  out->spec_hash = config.spec_hash;
  out->spec = config.spec;
  out->schedule_history = config.schedule_history;
  out->lineage = config.lineage;
  out->datasets = config.datasets;
  out->world_size = config.identity.world_size;
  out->canonical_replicas = config.identity.canonical_replicas;
  out->dp_degree = config.identity.dp_degree;
  out->dp_group_id = config.identity.dp_group_id;
  out->aggregate_timeout_s = config.identity.aggregate_timeout_s;
  out->route.run_id = config.identity.run_id;
  out->route.aggregate_dir = config.identity.aggregate_dir;
  out->route.leader_address = config.identity.leader_address;
  out->route.global_rank = config.identity.global_rank;
  out->progress = std::move(instance);
  return out;
}

}  // namespace

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
  absl::StatusOr<Attachment> attachment;
  if (first.attach().wants_progress()) {
    // The attach runs here; a slow one (a first attach of a text corpus tokenizes it)
    // is reported to the client meanwhile. It always runs to the end, even when the
    // client has gone: the conversion it does fills the token cache for the next one.
    const AttachProgressReporter::Watch watch = progress_.Report(
        [stream](const proto::AttachServerMessage& message) { return stream->Write(message); });
    attachment = registry_->Attach(first.attach());
  } else {
    attachment = registry_->Attach(first.attach());
  }
  if (!attachment.ok()) {
    Log()->warn("attach refused (pid {}, rank {}, run '{}'): {}", first.attach().client_pid(),
                first.attach().rank().global_rank(), first.attach().rank().run_id(),
                attachment.status().ToString());
    counters_->CountAttach(false);
    counters_->CountError(metrics::ErrorKind::kAttach);
    return ToGrpcStatus(attachment.status());
  }
  proto::AttachServerMessage reply;
  *reply.mutable_attached() = attachment->reply;
  // The ring's descriptors wait on the hand-off socket under a one-time token: gRPC
  // cannot carry them.
  std::string token;
  if (handoff_ != nullptr) {
    absl::StatusOr<std::string> offered = OfferRing(*attachment, first.attach());
    if (!offered.ok()) {
      Log()->error("attach of pid {} to {}: cannot offer the ring's descriptors: {}",
                   first.attach().client_pid(), attachment->reply.instance_id(),
                   offered.status().ToString());
      registry_->Detach(*attachment, /*died=*/false);
      counters_->CountAttach(false);
      counters_->CountError(metrics::ErrorKind::kAttach);
      return ToGrpcStatus(offered.status());
    }
    token = *std::move(offered);
    reply.mutable_attached()->set_fd_socket(handoff_->socket_path());
    reply.mutable_attached()->set_fd_token(token);
  }
  counters_->CountAttach(true);
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
  if (!token.empty()) handoff_->Withdraw(token);  // never claimed: close the fds now
  registry_->Detach(*attachment, /*died=*/!clean);
  return grpc::Status::OK;
}

absl::StatusOr<std::string> ZephonService::OfferRing(const Attachment& attachment,
                                                     const proto::AttachRequest& request) {
  absl::StatusOr<shm::RingFds> fds = attachment.instance->ReaderFds();
  if (!fds.ok()) return fds.status();
  return handoff_->Offer(*std::move(fds),
                         absl::StrCat("instance ", attachment.reply.instance_id(), " ring ",
                                      attachment.reply.ring_name(), " rank ",
                                      request.rank().global_rank(), " (pid ",
                                      request.client_pid(), ")"));
}

grpc::Status ZephonService::Checkpoint(grpc::ServerContext*,
                                       const proto::CheckpointRequest* request,
                                       proto::CheckpointResult* reply) {
  absl::StatusOr<std::shared_ptr<PipelineInstance>> instance =
      registry_->FindInstance(request->instance_id());
  if (!instance.ok()) return ToGrpcStatus(instance.status());
  const std::vector<uint32_t> ranks = (*instance)->attached_ranks();
  if (std::find(ranks.begin(), ranks.end(), request->global_rank()) == ranks.end()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("rank ", request->global_rank(), " is not attached to ",
                                     request->instance_id()));
  }
  const InstanceConfig& config = (*instance)->config();
  checkpoint::RoundCall call;
  call.run_id = config.run_key;
  call.round = request->round();
  call.global_rank = request->global_rank();
  call.taken = request->taken();
  const std::shared_ptr<PipelineInstance> call_instance = *instance;
  call.instance = RoundInstanceOf(*std::move(instance));
  const absl::Time deadline =
      env_->Now() + absl::Seconds(config.identity.aggregate_timeout_s);
  absl::StatusOr<proto::CheckpointResult> result = rounds_->Participate(std::move(call), deadline);
  if (!result.ok()) {
    SubsystemLogger("checkpoint")->warn(
        "run={} instance={} rank={} ring={} gen={}: checkpoint round {} failed: {}",
        config.run_key, request->instance_id(), request->global_rank(), config.shm_name,
        call_instance->ring_generation(), request->round(), result.status().ToString());
    return ToGrpcStatus(result.status());
  }
  *reply = *std::move(result);
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

namespace zephon::daemon {

proto::StatusReply RedactForPeers(proto::StatusReply reply) {
  reply.clear_pid();
  reply.clear_socket();
  reply.clear_shm_prefix();
  reply.mutable_shard_cache()->clear_dir();
  if (reply.has_token_cache()) reply.mutable_token_cache()->clear_dir();
  if (reply.has_conversions()) reply.mutable_conversions()->clear_current();
  if (reply.checkpoint_rounds().has_last()) {
    reply.mutable_checkpoint_rounds()->mutable_last()->clear_error();
  }
  for (proto::InstanceStatus& instance : *reply.mutable_instances()) {
    instance.clear_spec_hash();
    instance.clear_ring_name();
    for (proto::ReaderStatus& reader : *instance.mutable_readers()) reader.clear_pid();
  }
  return reply;
}

grpc::Status PeerStatusService::Status(grpc::ServerContext* context,
                                       const proto::StatusRequest* request,
                                       proto::StatusReply* reply) {
  std::string nonce;
  if (auth_ != nullptr) {
    absl::Status admitted = auth_->Verify(*context, checkpoint::kStatusMethod, *request, &nonce);
    if (!admitted.ok()) {
      refusals_.Warn("a Status call", context->peer(), admitted.message());
      return ToGrpcStatus(admitted);
    }
  }
  const InstanceRegistry* registry = registry_.load();
  if (registry == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "zephond is starting");
  }
  *reply = RedactForPeers(registry->Status());
  if (auth_ != nullptr) auth_->SignReply(context, nonce, *reply);
  return grpc::Status::OK;
}

}  // namespace zephon::daemon
