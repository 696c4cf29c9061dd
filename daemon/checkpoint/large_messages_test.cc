// Checkpoint-sized messages over every kind of Zephon channel: the limits of
// common/rpc_limits.h, applied by the production builders (PeerClient::Connect,
// client::ConnectOrStart, ApplyRpcMessageLimits as main.cc uses it), carry messages past
// gRPC's default 4 MiB, and the worst-case checkpoint of the largest world fits them.
#include <cstddef>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/connection.h"
#include "common/rpc_limits.h"
#include "common/temp_dir_testing.h"
#include "daemon/checkpoint/peer_service.h"
#include "gtest/gtest.h"
#include "google/protobuf/io/coded_stream.h"
#include "proto/checkpoint.grpc.pb.h"
#include "proto/zephon.grpc.pb.h"

namespace zephon::checkpoint {
namespace {

constexpr size_t kOverDefaultLimit = size_t{6} << 20;  // gRPC's default receive: 4 MiB

// Bytes one element of a repeated message field adds: tag, length, body.
uint64_t RepeatedElementBytes(const google::protobuf::Message& m) {
  const size_t body = m.ByteSizeLong();
  return 1 + google::protobuf::io::CodedOutputStream::VarintSize64(body) + body;
}

TEST(RpcLimitsTest, TheLargestWorldsCheckpointAndRestoreFitWithMargin) {
  proto::RankProgress rank;  // every field at its widest
  rank.set_global_rank(kMaxWorldRanks - 1);
  rank.set_dp_degree(kMaxWorldRanks);
  rank.set_dp_group_id(kMaxWorldRanks - 1);
  rank.set_taken(UINT64_MAX);
  rank.set_instance_id(std::string(160, 'i'));  // run key, dp, group, spec hash, serial
  rank.set_daemon(std::string(108, 'd'));       // a socket path (sun_path) or host:port
  proto::LaneProgress lane;
  lane.set_lane(kMaxWorldRanks - 1);
  lane.set_next_batch_index(UINT64_MAX);
  lane.set_flush_group_chunk(UINT64_MAX);
  lane.set_records_into_group(UINT64_MAX);
  const uint64_t spec_bytes = 64 << 10;  // a generous pipeline spec
  const uint64_t checkpoint = kMaxWorldRanks * RepeatedElementBytes(rank) +
                              kMaxWorldRanks * RepeatedElementBytes(lane) + spec_bytes + 4096;
  // A restoring attach carries the checkpoint and the spec again.
  const uint64_t attach = checkpoint + spec_bytes;
  EXPECT_LT(2 * attach, static_cast<uint64_t>(kMaxRpcMessageBytes))
      << "checkpoint " << checkpoint << " bytes: keep 2x headroom";
}

// Answers a Report with the report itself as the "checkpoint": both directions carry
// whatever size the caller sends.
class EchoLeader final : public proto::ZephonPeer::Service {
  grpc::Status Report(grpc::ServerContext*, const proto::CheckpointReport* request,
                      proto::CheckpointResult* response) override {
    response->set_checkpoint(request->SerializeAsString());
    return grpc::Status::OK;
  }
};

// A CheckpointReport of `bytes` or more (a world's worth of ranks).
proto::CheckpointReport BigReport(size_t bytes) {
  proto::CheckpointReport report;
  report.set_run_id("big");
  for (size_t i = 0; i <= bytes / 200; ++i) {  // each rank encodes to over 200 bytes
    proto::RankProgress* r = report.add_ranks();
    r->set_global_rank(static_cast<uint32_t>(i));
    r->set_instance_id(std::string(200, 'x'));
  }
  return report;
}

enum class Limits { kDefault, kAll, kPeerServer };

std::unique_ptr<grpc::Server> Serve(grpc::Service* service, const std::string& address,
                                    Limits limits) {
  grpc::ServerBuilder builder;
  if (limits == Limits::kAll) ApplyRpcMessageLimits(&builder);
  if (limits == Limits::kPeerServer) ApplyPeerServerLimits(&builder);
  builder.AddListeningPort(address, grpc::InsecureServerCredentials());
  builder.RegisterService(service);
  return builder.BuildAndStart();
}

// Sends `report` through a real PeerClient to an echoing leader built with `limits`.
absl::StatusOr<proto::CheckpointResult> ReportThrough(Limits limits,
                                                      const proto::CheckpointReport& report) {
  const testing::ShortTempDir dir = testing::MakeShortTempDir("peer");
  const std::string address = "unix:" + dir.path() + "/leader.sock";
  EchoLeader leader;
  std::unique_ptr<grpc::Server> server = Serve(&leader, address, limits);
  if (server == nullptr) return absl::InternalError("cannot serve on " + address);
  absl::StatusOr<std::unique_ptr<PeerClient>> client = PeerClient::Connect(address, nullptr);
  if (!client.ok()) return client.status();
  absl::StatusOr<proto::CheckpointResult> result =
      (*client)->Report(report, absl::Now() + absl::Seconds(60));
  server->Shutdown();
  return result;
}

TEST(RpcLimitsTest, PeerReportsAndResultsOver4MiBGoThrough) {
  // As main.cc builds the peer server.
  const proto::CheckpointReport report = BigReport(kOverDefaultLimit);
  auto result = ReportThrough(Limits::kPeerServer, report);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->checkpoint(), report.SerializeAsString());
}

TEST(RpcLimitsTest, AServerWithoutTheLimitsRefusesWhatTheClientSends) {
  // The failure every builder avoids: gRPC's default receive limit on the server.
  auto result = ReportThrough(Limits::kDefault, BigReport(kOverDefaultLimit));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted) << result.status();
}

TEST(RpcLimitsTest, ThePeerServerBoundsWhatAnUnauthenticatedCallerCanMakeItHold) {
  // gRPC parses a request before its signature is checked: the peer server accepts no
  // more than a follower's report needs.
  auto result = ReportThrough(Limits::kPeerServer,
                              BigReport(size_t{kMaxPeerRequestBytes} + (1 << 20)));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted) << result.status();
}

// A daemon's Unix-socket service whose Checkpoint answers with `bytes` of checkpoint.
class BigCheckpointDaemon final : public proto::Zephon::Service {
 public:
  explicit BigCheckpointDaemon(size_t bytes) : bytes_(bytes) {}
  grpc::Status Checkpoint(grpc::ServerContext*, const proto::CheckpointRequest*,
                          proto::CheckpointResult* response) override {
    response->set_checkpoint(std::string(bytes_, 'c'));
    return grpc::Status::OK;
  }

 private:
  const size_t bytes_;
};

TEST(RpcLimitsTest, TheClientChannelReceivesCheckpointsOver4MiB) {
  const testing::ShortTempDir dir = testing::MakeShortTempDir("client_big");
  const std::string socket = dir.path() + "/zephond.sock";
  BigCheckpointDaemon daemon(kOverDefaultLimit);
  std::unique_ptr<grpc::Server> server = Serve(&daemon, "unix:" + socket, Limits::kAll);
  ASSERT_NE(server, nullptr);
  client::ConnectOptions options;
  options.socket_path = socket;
  auto channel = client::ConnectOrStart(options);
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto stub = proto::Zephon::NewStub(*channel);
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(60)));
  proto::CheckpointRequest request;
  proto::CheckpointResult result;
  const grpc::Status status = stub->Checkpoint(&context, request, &result);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(result.checkpoint().size(), kOverDefaultLimit);
  server->Shutdown();
}

}  // namespace
}  // namespace zephon::checkpoint
