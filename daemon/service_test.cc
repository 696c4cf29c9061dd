#include "daemon/service.h"

#include <memory>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

namespace zephon::daemon {
namespace {

class PeerStatusServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = proto::Zephon::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(port_), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override { server_->Shutdown(); }

  PeerStatusService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<proto::Zephon::Stub> stub_;
};

TEST_F(PeerStatusServiceTest, AnswersUnavailableUntilBound) {
  grpc::ClientContext context;
  proto::StatusReply reply;
  EXPECT_EQ(stub_->Status(&context, proto::StatusRequest(), &reply).error_code(),
            grpc::StatusCode::UNAVAILABLE);
}

TEST_F(PeerStatusServiceTest, ServesTheRegistrysStatusOverTcp) {
  RegistryOptions options;
  options.daemon_label = "/run/zephon/test.sock";
  options.metrics_address = "127.0.0.1:9464";
  InstanceRegistry registry(options);
  service_.Bind(&registry);
  grpc::ClientContext context;
  proto::StatusReply reply;
  ASSERT_TRUE(stub_->Status(&context, proto::StatusRequest(), &reply).ok());
  EXPECT_EQ(reply.socket(), "/run/zephon/test.sock");
  EXPECT_EQ(reply.metrics_address(), "127.0.0.1:9464");
  EXPECT_GT(reply.pid(), 0);
}

TEST_F(PeerStatusServiceTest, OtherRpcsAreUnimplemented) {
  grpc::ClientContext context;
  proto::ExplainReply reply;
  EXPECT_EQ(stub_->Explain(&context, proto::ExplainRequest(), &reply).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

}  // namespace
}  // namespace zephon::daemon
