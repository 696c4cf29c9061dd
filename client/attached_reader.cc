#include "client/attached_reader.h"

#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/connection.h"
#include "client/daemon_queries.h"
#include "client/request_paths.h"
#include "client/stall_diagnosis.h"
#include "common/status_macros.h"
#include "shm/fd_passing.h"

namespace zephon::client {
namespace {

// How long a timed-out read spends asking zephond which peer holds the ring.
constexpr absl::Duration kStallQueryTimeout = absl::Seconds(5);

// Cancels a gRPC call that has not finished within `timeout` of its start or of its
// last Extend(): long-lived streams carry no RPC deadline, yet no wait on the daemon may
// be unbounded. RAII; the destructor marks the call finished and joins the timer thread.
class CancelAfter {
 public:
  CancelAfter(grpc::ClientContext* context, absl::Duration timeout)
      : timeout_(timeout), deadline_(absl::Now() + timeout), timer_([this, context] {
          absl::MutexLock lock(&mu_);
          while (!done_) {
            if (mu_.AwaitWithDeadline(absl::Condition(&done_), deadline_)) break;
            if (absl::Now() >= deadline_) {  // not moved by an Extend() meanwhile
              fired_ = true;
              context->TryCancel();
              break;
            }
          }
        }) {}
  ~CancelAfter() {
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
    }
    timer_.join();
  }
  // The call made progress: its deadline is `timeout` from now.
  void Extend() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    deadline_ = absl::Now() + timeout_;
  }
  // True when the call was cancelled for taking too long. Call after the call returned.
  bool fired() ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    return fired_;
  }

 private:
  const absl::Duration timeout_;
  absl::Mutex mu_;
  absl::Time deadline_ ABSL_GUARDED_BY(mu_);
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
  std::thread timer_;  // last: started once the members it reads exist
};

}  // namespace

absl::StatusOr<std::unique_ptr<AttachedReader>> AttachedReader::Attach(
    std::shared_ptr<grpc::Channel> channel, const proto::AttachRequest& request,
    absl::Duration timeout, const std::string& socket_path) {
  proto::AttachClientMessage first;
  *first.mutable_attach() = request;
  RETURN_IF_ERROR(AbsolutizeLocalPaths(first.mutable_attach()));
  std::unique_ptr<AttachedReader> r(new AttachedReader());
  r->channel_ = std::move(channel);
  r->stub_ = proto::Zephon::NewStub(r->channel_);
  r->context_ = std::make_unique<grpc::ClientContext>();
  r->stream_ = r->stub_->Attach(r->context_.get());

  proto::AttachServerMessage reply;
  bool ok = false;
  bool timed_out = false;
  // zephond sends AttachProgress while the attach works (a first attach of a text corpus
  // tokenizes it, one of an s3:// dataset downloads its index); the deadline runs from
  // the last one whose counters advanced.
  first.mutable_attach()->set_wants_progress(true);
  proto::AttachProgress progress;
  {
    CancelAfter guard(r->context_.get(), timeout);
    // No stderr line here: a library prints nothing unasked. The Python client shows a
    // progress line on a terminal from zephond's status (zephon/progress.py).
    ok = r->stream_->Write(first);
    while (ok && (ok = r->stream_->Read(&reply)) && reply.has_progress()) {
      if (reply.progress().tokenized_bytes() != progress.tokenized_bytes() ||
          reply.progress().tokenized_files() != progress.tokenized_files() ||
          reply.progress().downloaded_bytes() != progress.downloaded_bytes()) {
        guard.Extend();
      }
      progress = reply.progress();
    }
    timed_out = !ok && guard.fired();
  }
  if (!ok || !reply.has_attached()) {
    r->detached_ = true;
    grpc::Status status = r->stream_->Finish();
    if (timed_out) {
      return absl::DeadlineExceededError(absl::StrCat(
          "zephond did not answer the attach within ", absl::FormatDuration(timeout),
          progress.activity().empty()
              ? std::string()
              : absl::StrCat(" of its last progress (it was ", progress.activity(), ")"),
          "; raise attach_timeout_s if it is that slow"));
    }
    if (status.ok()) return absl::InternalError("zephond closed the attach without a reply");
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      return absl::UnavailableError(absl::StrCat("zephond stopped answering during attach: ",
                                                 status.error_message()));
    }
    return FromGrpc(status);
  }
  r->reply_ = reply.attached();
  r->global_rank_ = request.rank().has_global_rank()
                        ? static_cast<uint32_t>(request.rank().global_rank())
                        : 0;
  r->next_round_ = r->reply_.next_round();
  // gRPC cannot carry descriptors: claim the ring's memfds on the hand-off socket with
  // the one-time token (within `timeout` of the reply).
  if (r->reply_.fd_socket().empty() || r->reply_.fd_token().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "zephond offered no ring descriptors for ", r->reply_.instance_id(),
        ": it predates ring layout 2; upgrade zephond"));
  }
  const std::string handoff_path =
      socket_path.empty() ? r->reply_.fd_socket() : shm::HandoffSocketPath(socket_path);
  ASSIGN_OR_RETURN(shm::RingFds fds,
                   shm::ClaimRingFds(handoff_path, r->reply_.fd_token(), absl::Now() + timeout));
  ASSIGN_OR_RETURN(
      r->ring_, shm::RingReader::Open(std::move(fds), r->reply_.ring_name(),
                                      r->reply_.reader_index(), r->reply_.lease_epoch(),
                                      r->reply_.ring_generation(),
                                      absl::Milliseconds(r->reply_.producer_timeout_ms())));
  return r;
}

AttachedReader::~AttachedReader() { Detach(); }

absl::StatusOr<shm::SlotView> AttachedReader::Next(absl::Duration timeout) {
  if (detached_) return absl::FailedPreconditionError("this reader is detached");
  absl::StatusOr<shm::SlotView> slot = ring_->Acquire(timeout);
  if (slot.status().code() != absl::StatusCode::kDeadlineExceeded) return slot;
  // A timed-out read is most often a stopped DP-group peer holding the shared ring: ask
  // the daemon (bounded) which reader lags and name it in the error.
  std::string why;
  absl::StatusOr<proto::StatusReply> status = DaemonStatus(channel_, kStallQueryTimeout);
  if (!status.ok()) {
    why = absl::StrCat("zephond's status could not tell which peer lags: ",
                       status.status().message());
  } else {
    for (const proto::InstanceStatus& instance : status->instances()) {
      if (instance.instance_id() == reply_.instance_id()) {
        why = DescribeStall(instance, reply_.reader_index());
      }
    }
  }
  if (why.empty()) return slot.status();
  return absl::DeadlineExceededError(absl::StrCat(slot.status().message(), ": ", why));
}

absl::Status AttachedReader::Release(uint64_t seq) {
  if (detached_) return absl::FailedPreconditionError("this reader is detached");
  return ring_->Release(seq);
}

uint64_t AttachedReader::taken() const { return ring_ ? ring_->batches_taken() : 0; }

absl::StatusOr<std::string> AttachedReader::Checkpoint(absl::Duration timeout) {
  absl::StatusOr<proto::CheckpointResult> result = CheckpointRound(timeout);
  if (!result.ok()) return result.status();
  return std::move(*result->mutable_checkpoint());
}

absl::StatusOr<proto::CheckpointResult> AttachedReader::CheckpointRound(
    absl::Duration timeout) {
  if (detached_) return absl::FailedPreconditionError("this reader is detached");
  proto::CheckpointRequest request;
  request.set_instance_id(reply_.instance_id());
  request.set_reader_index(reply_.reader_index());
  request.set_lease_epoch(reply_.lease_epoch());
  request.set_global_rank(global_rank_);
  request.set_taken(taken());
  request.set_round(next_round_);
  proto::CheckpointResult result;
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  absl::Status s = FromGrpc(stub_->Checkpoint(&context, request, &result));
  // Every rank of the round gets the same answer, success or failure, so every rank
  // moves on to the next round number: a retry after a failed round is a new round.
  ++next_round_;
  if (!s.ok()) return s;
  return result;
}

absl::StatusOr<std::string> AttachedReader::Explain(absl::Duration timeout) const {
  if (detached_) return absl::FailedPreconditionError("this reader is detached");
  return client::Explain(channel_, reply_.instance_id(), timeout);
}

uint64_t AttachedReader::released() const { return ring_ ? ring_->released() : 0; }

void AttachedReader::Detach() {
  if (detached_) return;
  detached_ = true;
  proto::AttachClientMessage bye;
  bye.set_detach(true);
  // The daemon ends the stream right after reading the detach; a wedged daemon must
  // not hang the trainer, so every wait on it here is bounded: sending the detach (a
  // daemon that stopped reading leaves Write blocked on flow control), closing our side
  // and waiting for the stream's end.
  {
    CancelAfter guard(context_.get(), absl::Seconds(5));
    if (stream_->Write(bye)) stream_->WritesDone();
    (void)stream_->Finish();
  }
  // Disconnect now, not when the reader is destroyed: the mapping may outlive the lease
  // (a client's arrays still view it) and must not keep a socket (and a daemon fd) open.
  stream_.reset();
  context_.reset();
  stub_.reset();
  channel_.reset();
}

}  // namespace zephon::client
