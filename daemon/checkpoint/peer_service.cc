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

grpc::Status PeerService::Report(grpc::ServerContext* context,
                                 const proto::CheckpointReport* request,
                                 proto::CheckpointResult* response) {
  const absl::Time cap = absl::Now() + RoundTimeout(*request) + kReportWaitSlack;
  const absl::Time deadline = std::min(absl::FromChrono(context->deadline()), cap);
  absl::StatusOr<proto::CheckpointResult> result = aggregator_->Submit(
      *request, deadline, [context] { return context->IsCancelled(); });
  if (!result.ok()) return ToGrpc(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<PeerClient>> PeerClient::Connect(
    const std::string& address, std::shared_ptr<grpc::ChannelCredentials> credentials) {
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
  return std::unique_ptr<PeerClient>(new PeerClient(address, std::move(channel)));
}

PeerClient::PeerClient(std::string address, std::shared_ptr<grpc::Channel> channel)
    : address_(std::move(address)),
      channel_(std::move(channel)),
      stub_(proto::ZephonPeer::NewStub(channel_)) {}

absl::StatusOr<proto::CheckpointResult> PeerClient::Report(
    const proto::CheckpointReport& report, absl::Time deadline) const {
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(deadline));
  proto::CheckpointResult result;
  const grpc::Status status = stub_->Report(&context, report, &result);
  if (status.ok()) return result;
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
