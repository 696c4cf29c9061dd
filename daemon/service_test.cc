#include "daemon/service.h"

#include <memory>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

namespace zephon::daemon {
namespace {

class PeerStatusServiceTest : public ::testing::Test {
 protected:
  explicit PeerStatusServiceTest(std::shared_ptr<const checkpoint::PeerAuthenticator> auth = nullptr)
      : service_(std::move(auth)) {}
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
  EXPECT_EQ(reply.metrics_address(), "127.0.0.1:9464");
  EXPECT_GT(reply.uptime_s(), 0);
  // Redacted for the network: no local paths or process ids.
  EXPECT_EQ(reply.socket(), "");
  EXPECT_EQ(reply.pid(), 0);
}

TEST(RedactForPeersTest, ClearsPidsPathsAndSpecHashesKeepsProgress) {
  proto::StatusReply full;
  full.set_pid(42);
  full.set_socket("/run/zephon/zephond.sock");
  full.set_shm_prefix("zephon.0.abc");
  full.mutable_shard_cache()->set_dir("/var/cache/zephon/objects");
  full.mutable_shard_cache()->set_hits(7);
  full.mutable_token_cache()->set_dir("/var/cache/zephon");
  full.mutable_token_cache()->set_misses(3);
  full.mutable_conversions()->set_current("/data/private/part-07.jsonl");
  full.mutable_conversions()->set_tokenized_bytes(1234);
  full.mutable_checkpoint_rounds()->set_timeout(1);
  full.mutable_checkpoint_rounds()->mutable_last()->set_error("ranks [4] of /run/zephon/x.sock");
  proto::InstanceStatus* instance = full.add_instances();
  instance->set_run_id("run-a");
  instance->set_spec_hash("0123");
  instance->set_ring_name("zephon.0.abc.1");
  instance->set_produced(99);
  proto::ReaderStatus* reader = instance->add_readers();
  reader->set_pid(4242);
  reader->set_global_rank(3);
  reader->set_lag(5);
  const proto::StatusReply shown = RedactForPeers(full);
  EXPECT_EQ(shown.pid(), 0);
  EXPECT_EQ(shown.socket(), "");
  EXPECT_EQ(shown.shm_prefix(), "");
  EXPECT_EQ(shown.shard_cache().dir(), "");
  EXPECT_EQ(shown.shard_cache().hits(), 7u);
  EXPECT_EQ(shown.token_cache().dir(), "");
  EXPECT_EQ(shown.token_cache().misses(), 3u);
  EXPECT_EQ(shown.conversions().current(), "");
  EXPECT_EQ(shown.conversions().tokenized_bytes(), 1234u);
  EXPECT_EQ(shown.checkpoint_rounds().timeout(), 1u);
  EXPECT_EQ(shown.checkpoint_rounds().last().error(), "");
  EXPECT_EQ(shown.instances(0).spec_hash(), "");
  EXPECT_EQ(shown.instances(0).ring_name(), "");
  EXPECT_EQ(shown.instances(0).run_id(), "run-a");
  EXPECT_EQ(shown.instances(0).produced(), 99u);
  EXPECT_EQ(shown.instances(0).readers(0).pid(), 0);
  EXPECT_EQ(shown.instances(0).readers(0).global_rank(), 3u);
  EXPECT_EQ(shown.instances(0).readers(0).lag(), 5u);
}

class SignedPeerStatusServiceTest : public PeerStatusServiceTest {
 protected:
  SignedPeerStatusServiceTest() : PeerStatusServiceTest(Auth('s')) {}
  static std::shared_ptr<const checkpoint::PeerAuthenticator> Auth(char fill) {
    return *checkpoint::PeerAuthenticator::FromSecret(std::string(40, fill));
  }
};

TEST_F(SignedPeerStatusServiceTest, OnlySignedCallsGetAnAnswer) {
  InstanceRegistry registry{RegistryOptions()};
  service_.Bind(&registry);
  {
    grpc::ClientContext context;
    proto::StatusReply reply;
    const grpc::Status unsigned_call = stub_->Status(&context, proto::StatusRequest(), &reply);
    EXPECT_EQ(unsigned_call.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    Auth('w')->Sign(&context, checkpoint::kStatusMethod, proto::StatusRequest());
    proto::StatusReply reply;
    EXPECT_EQ(stub_->Status(&context, proto::StatusRequest(), &reply).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext context;
    std::shared_ptr<const checkpoint::PeerAuthenticator> auth = Auth('s');
    const std::string nonce = auth->Sign(&context, checkpoint::kStatusMethod, proto::StatusRequest());
    proto::StatusReply reply;
    ASSERT_TRUE(stub_->Status(&context, proto::StatusRequest(), &reply).ok());
    EXPECT_TRUE(auth->VerifyReply(context, nonce, reply).ok());
    EXPECT_FALSE(Auth('w')->VerifyReply(context, nonce, reply).ok());
  }
}

TEST_F(PeerStatusServiceTest, OtherRpcsAreUnimplemented) {
  grpc::ClientContext context;
  proto::ExplainReply reply;
  EXPECT_EQ(stub_->Explain(&context, proto::ExplainRequest(), &reply).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

}  // namespace
}  // namespace zephon::daemon
