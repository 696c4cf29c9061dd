// AttachedReader against an in-process fake zephond that attaches the reader for real
// (ring, hand-off socket, lease) and then wedges: it stops reading the Attach stream.
#include "client/attached_reader.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/temp_dir_testing.h"
#include "daemon/fd_handoff.h"
#include "proto/zephon.grpc.pb.h"
#include "shm/ring_writer.h"

namespace zephon::client {
namespace {

// Answers the first Attach with a real lease and descriptors, then never reads again
// until the call is cancelled: a daemon stuck in a long stall.
class WedgedAttachService : public proto::Zephon::Service {
 public:
  WedgedAttachService(shm::RingWriter* writer, daemon::FdHandoff* handoff)
      : writer_(writer), handoff_(handoff) {}

  grpc::Status Attach(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<proto::AttachServerMessage,
                                               proto::AttachClientMessage>* stream) override {
    proto::AttachClientMessage first;
    if (!stream->Read(&first)) return grpc::Status(grpc::StatusCode::ABORTED, "no attach");
    auto lease = writer_->AttachReader(0, getpid(), 0, std::nullopt);
    auto fds = writer_->ReaderFds();
    if (!lease.ok() || !fds.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "ring");
    auto token = handoff_->Offer(*std::move(fds), "wedged test reader");
    if (!token.ok()) return grpc::Status(grpc::StatusCode::INTERNAL, "offer");
    proto::AttachServerMessage reply;
    proto::AttachReply* attached = reply.mutable_attached();
    attached->set_instance_id("wedged/instance");
    attached->set_ring_name(writer_->name());
    attached->set_ring_generation(writer_->generation());
    attached->set_reader_index(lease->index);
    attached->set_lease_epoch(lease->lease_epoch);
    attached->set_producer_timeout_ms(10000);
    attached->set_fd_socket(handoff_->socket_path());
    attached->set_fd_token(*token);
    stream->Write(reply);
    while (!context->IsCancelled()) absl::SleepFor(absl::Milliseconds(10));
    return grpc::Status::OK;
  }

 private:
  shm::RingWriter* writer_;
  daemon::FdHandoff* handoff_;
};

TEST(AttachedReaderTest, DetachFromADaemonThatStoppedReadingIsBounded) {
  auto writer = shm::RingWriter::Create(absl::StrCat("attached-reader-test.", getpid()),
                                        shm::RingGeometry{4, 8192, 4}, "wedged/instance");
  ASSERT_TRUE(writer.ok()) << writer.status();
  const testing::ShortTempDir socket_dir = testing::MakeShortTempDir("attached_reader");
  daemon::FdHandoffOptions options;
  options.socket_path = socket_dir.path() + "/handoff.fds";
  auto handoff = daemon::FdHandoff::Start(options);
  ASSERT_TRUE(handoff.ok()) << handoff.status();
  WedgedAttachService service(writer->get(), handoff->get());
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  // A small receive window the daemon never replenishes (it does not read): the client's
  // detach message then waits on HTTP/2 flow control, as it would behind a full window.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 1);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  auto reader = AttachedReader::Attach(channel, proto::AttachRequest(), absl::Seconds(10));
  ASSERT_TRUE(reader.ok()) << reader.status();

  absl::Notification detached;
  std::thread detach([&] {
    (*reader)->Detach();
    detached.Notify();
  });
  // Detach bounds its wait at 5 s; 20 s leaves room for a loaded machine.
  EXPECT_TRUE(detached.WaitForNotificationWithTimeout(absl::Seconds(20)))
      << "Detach hung on a daemon that stopped reading the Attach stream";
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));  // unblocks a hang
  detach.join();
  EXPECT_TRUE(detached.HasBeenNotified());
}

}  // namespace
}  // namespace zephon::client
