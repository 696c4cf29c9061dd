// AttachedReader against an in-process fake zephond that attaches the reader for real
// (ring, hand-off socket, lease) and then wedges: it stops reading the Attach stream.
#include "client/attached_reader.h"

#include <unistd.h>

#include <atomic>
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

// Sends AttachProgress every 100 ms for `progress_for`, its counters advancing or not,
// then an AttachReply without ring descriptors (so Attach stops right after the reply
// with FAILED_PRECONDITION: what matters here is that it got the reply).
class SlowAttachService : public proto::Zephon::Service {
 public:
  SlowAttachService(absl::Duration progress_for, bool advancing, bool downloads = false)
      : progress_for_(progress_for), advancing_(advancing), downloads_(downloads) {}

  grpc::Status Attach(grpc::ServerContext* context,
                      grpc::ServerReaderWriter<proto::AttachServerMessage,
                                               proto::AttachClientMessage>* stream) override {
    proto::AttachClientMessage first;
    if (!stream->Read(&first)) return grpc::Status(grpc::StatusCode::ABORTED, "no attach");
    wanted_progress_ = first.attach().wants_progress();
    const absl::Time end = absl::Now() + progress_for_;
    uint64_t bytes = 0;
    while (absl::Now() < end && !context->IsCancelled()) {
      proto::AttachServerMessage message;
      if (advancing_) bytes += 1000;
      if (downloads_) {
        message.mutable_progress()->set_downloaded_bytes(bytes);
      } else {
        message.mutable_progress()->set_tokenized_bytes(bytes);
      }
      message.mutable_progress()->set_activity("tokenizing /data/web/part-07.jsonl");
      if (!stream->Write(message)) return grpc::Status::OK;
      absl::SleepFor(absl::Milliseconds(100));
    }
    if (context->IsCancelled()) return grpc::Status::CANCELLED;
    proto::AttachServerMessage reply;
    reply.mutable_attached()->set_instance_id("slow/instance");
    stream->Write(reply);
    return grpc::Status::OK;
  }

  bool wanted_progress() const { return wanted_progress_; }

 private:
  const absl::Duration progress_for_;
  const bool advancing_;
  const bool downloads_;  // the advancing counter is downloaded_bytes, not tokenized_bytes
  std::atomic<bool> wanted_progress_{false};
};

absl::Status AttachTo(SlowAttachService* service, absl::Duration timeout) {
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) return absl::InternalError("no server");
  auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                     grpc::InsecureChannelCredentials());
  auto reader = AttachedReader::Attach(channel, proto::AttachRequest(), timeout);
  server->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  return reader.status();
}

TEST(AttachedReaderTest, AdvancingProgressKeepsALongAttachAlive) {
  // The reply comes after 2 s, four times the timeout: progress moved the deadline.
  SlowAttachService service(absl::Seconds(2), /*advancing=*/true);
  const absl::Status s = AttachTo(&service, absl::Milliseconds(500));
  EXPECT_TRUE(service.wanted_progress());
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("offered no ring descriptors"), std::string::npos) << s;
}

TEST(AttachedReaderTest, AdvancingDownloadsKeepALongAttachAlive) {
  // An s3:// dataset's index downloading for 2 s, four times the timeout.
  SlowAttachService service(absl::Seconds(2), /*advancing=*/true, /*downloads=*/true);
  const absl::Status s = AttachTo(&service, absl::Milliseconds(500));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
}

TEST(AttachedReaderTest, ProgressThatDoesNotAdvanceStillTimesOut) {
  // Heartbeats without progress are a stuck daemon: the timeout holds.
  SlowAttachService service(absl::Seconds(30), /*advancing=*/false);
  const absl::Time start = absl::Now();
  const absl::Status s = AttachTo(&service, absl::Milliseconds(500));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_NE(s.message().find("of its last progress (it was tokenizing /data/web/part-07.jsonl)"),
            std::string::npos)
      << s;
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));  // bounded: not the 30 s of heartbeats
}

}  // namespace
}  // namespace zephon::client
