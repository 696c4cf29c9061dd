#include "daemon/checkpoint/peer_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/rpc_limits.h"

namespace zephon::checkpoint {
namespace {

// Slack over the round's own timeout before a handler stops waiting on its own.
constexpr absl::Duration kReportWaitSlack = absl::Seconds(60);
constexpr absl::Duration kDefaultRoundTimeout = absl::Seconds(180);
constexpr absl::Duration kMaxRoundTimeout = absl::Hours(24);

grpc::Status ToGrpc(const absl::Status& status) {
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

absl::Duration RoundTimeout(const proto::CheckpointReport& report) {
  const double s = report.aggregate_timeout_s();
  if (!(s > 0)) return kDefaultRoundTimeout;
  return std::min(absl::Seconds(std::min(s, 1e9)), kMaxRoundTimeout);
}

}  // namespace

absl::Status PeerService::CheckAgainstLedRun(const proto::CheckpointReport& report) const {
  const std::string what =
      absl::StrCat("checkpoint round ", report.round(), " of run ", report.run_id());
  std::optional<LedRun> run;
  if (options_.led_run) run = options_.led_run(report.run_id());
  if (!run.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": this zephond does not lead that run (no global_rank 0 of it is attached "
        "here); the report from ", report.daemon(), " is refused"));
  }
  auto differs = [&](const char* field, const auto& got, const auto& want) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, ": the report from ", report.daemon(), " has ", field, "=", got,
        " but the run's ranks attached here with ", field, "=", want, "; refused"));
  };
  if (report.world_size() != run->world_size) {
    return differs("world_size", report.world_size(), run->world_size);
  }
  if (report.canonical_replicas() != run->canonical_replicas) {
    return differs("canonical_replicas", report.canonical_replicas(), run->canonical_replicas);
  }
  if (report.spec_hash() != run->spec_hash) {
    return differs("spec_hash", report.spec_hash(), run->spec_hash);
  }
  if (report.aggregate_dir() != run->aggregate_dir) {
    return differs("aggregate_dir", report.aggregate_dir(), run->aggregate_dir);
  }
  for (const proto::RankProgress& rank : report.ranks()) {
    if (rank.global_rank() >= run->world_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": the report from ", report.daemon(), " names global_rank ",
          rank.global_rank(), " outside world_size ", run->world_size, "; refused"));
    }
  }
  return absl::OkStatus();
}

grpc::Status PeerService::Report(grpc::ServerContext* context,
                                 const proto::CheckpointReport* request,
                                 proto::CheckpointResult* response) {
  std::string nonce;
  absl::Status admitted = absl::OkStatus();
  if (options_.auth != nullptr) {
    admitted = options_.auth->Verify(*context, kReportMethod, *request, &nonce);
  }
  if (admitted.ok()) admitted = CheckAgainstLedRun(*request);
  if (!admitted.ok()) {
    refusals_.Warn("a checkpoint report", context->peer(), admitted.message());
    return ToGrpc(admitted);
  }
  // gRPC's deadline is on the real clock, Submit's on env's: carry over what is left.
  const absl::Time now = options_.env->Now();
  const absl::Time cap = now + RoundTimeout(*request) + kReportWaitSlack;
  const absl::Time deadline =
      std::min(now + (absl::FromChrono(context->deadline()) - absl::Now()), cap);
  absl::StatusOr<proto::CheckpointResult> result = aggregator_->Submit(
      *request, deadline, [context] { return context->IsCancelled(); });
  if (!result.ok()) return ToGrpc(result.status());
  *response = *std::move(result);
  if (options_.auth != nullptr) options_.auth->SignReply(context, nonce, *response);
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<PeerClient>> PeerClient::Connect(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials,
    std::shared_ptr<const PeerAuthenticator> auth) {
  if (address.empty() || address.find_first_of(" \t\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("leader address '", address, "' is not a host:port"));
  }
  if (credentials == nullptr) credentials = grpc::InsecureChannelCredentials();
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(address, std::move(credentials), RpcChannelArguments());
  if (channel == nullptr) {
    return absl::InternalError(absl::StrCat("cannot create a channel to ", address));
  }
  return std::unique_ptr<PeerClient>(
      new PeerClient(address, std::move(channel), std::move(auth)));
}

PeerClient::PeerClient(std::string address, std::shared_ptr<grpc::Channel> channel,
                       std::shared_ptr<const PeerAuthenticator> auth)
    : address_(std::move(address)),
      channel_(std::move(channel)),
      auth_(std::move(auth)),
      stub_(proto::ZephonPeer::NewStub(channel_)) {}

absl::StatusOr<proto::CheckpointResult> PeerClient::Report(
    const proto::CheckpointReport& report, absl::Time deadline) const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  std::string nonce;
  if (auth_ != nullptr) nonce = auth_->Sign(&context, kReportMethod, report);
  proto::CheckpointResult result;
  const grpc::Status status = stub_->Report(&context, report, &result);
  if (status.ok()) {
    if (auth_ != nullptr) {
      absl::Status signed_answer = auth_->VerifyReply(context, nonce, result);
      if (!signed_answer.ok()) {
        return absl::UnauthenticatedError(absl::StrCat("leader zephond at ", address_, ": ",
                                                       signed_answer.message()));
      }
    }
    return result;
  }
  const std::string& message = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return absl::UnavailableError(
          absl::StrCat("leader zephond at ", address_, " unreachable: ", message));
    case grpc::StatusCode::CANCELLED:
      // We never cancel: the leader (or the connection) went away mid-call.
      return absl::UnavailableError(absl::StrCat("leader zephond at ", address_,
                                                 " unreachable: call cancelled (", message,
                                                 ")"));
    case grpc::StatusCode::UNAUTHENTICATED:
      return absl::UnauthenticatedError(
          absl::StrCat("leader zephond at ", address_, ": ", message));
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      if (message == "Deadline Exceeded") {  // gRPC's own: no answer from the leader
        return absl::DeadlineExceededError(absl::StrCat(
            "checkpoint round ", report.round(), " of run ", report.run_id(),
            ": no answer from the leader zephond at ", address_, " before the deadline"));
      }
      break;
    default:
      break;
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), message);
}

}  // namespace zephon::checkpoint
