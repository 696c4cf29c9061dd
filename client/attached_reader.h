// One attached rank: the Attach stream that is its lease with zephond, plus the ring
// reader that loans it batches zero-copy.
//
// Usage:
//   auto channel = ConnectOrStart({...});
//   auto reader = AttachedReader::Attach(*channel, request, absl::Seconds(30));
//   while (true) {
//     auto batch = (*reader)->Next(absl::Seconds(60));   // OUT_OF_RANGE = end of data
//     ... use batch->tensors ...
//     (*reader)->Release(batch->seq);                    // delivery of that batch
//   }
// Thread-compatible: one thread at a time per AttachedReader. Distinct readers in one
// process are independent (tests attach several ranks from one process).
#ifndef ZEPHON_CLIENT_ATTACHED_READER_H_
#define ZEPHON_CLIENT_ATTACHED_READER_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/zephon.grpc.pb.h"
#include "shm/ring_reader.h"

namespace zephon::client {

class AttachedReader {
 public:
  // Sends the AttachRequest (relative local paths made absolute against this process's
  // cwd first: AbsolutizeLocalPaths), claims the ring's descriptors on the daemon's
  // hand-off socket and maps the ring (data read-only). `socket_path` is the daemon socket
  // as this process sees it: the hand-off socket is next to it (a container may mount the
  // socket directory elsewhere than the daemon's path); empty = the path the daemon
  // reports. Errors carry the daemon's message (validation, spec-hash mismatch, a
  // refused hand-off) with its status code. No wait lasts more than `timeout` without
  // progress: the reply is awaited while zephond reports progress (AttachProgress counters
  // advancing, e.g. a first attach tokenizing a text corpus) and for at most `timeout`
  // after the last progress; the hand-off takes at most `timeout` after the reply.
  // While waiting over 10 s it writes a line to stderr every 30 s saying what zephond does.
  static absl::StatusOr<std::unique_ptr<AttachedReader>> Attach(
      std::shared_ptr<grpc::Channel> channel, const proto::AttachRequest& request,
      absl::Duration timeout, const std::string& socket_path = "");
  ~AttachedReader();  // detaches cleanly
  AttachedReader(const AttachedReader&) = delete;
  AttachedReader& operator=(const AttachedReader&) = delete;

  const proto::AttachReply& reply() const { return reply_; }

  // The next batch in this rank's order (a loan: valid until Released). OUT_OF_RANGE at
  // the end of the data; ABORTED when a peer died; UNAVAILABLE when zephond is gone;
  // DEADLINE_EXCEEDED after `timeout`, naming the DP-group peer that holds the ring when
  // one does (DescribeStall; costs one bounded Status RPC).
  absl::StatusOr<shm::SlotView> Next(absl::Duration timeout);
  // Releases a loaned batch. Releases may come out of order.
  absl::Status Release(uint64_t seq);
  // The ring mapping (valid for the reader's lifetime): every tensor of every batch lies
  // inside it.
  const uint8_t* mapping() const { return ring_->mapping(); }
  uint64_t mapping_bytes() const { return ring_->mapping_bytes(); }
  // Batches released so far (the ring's consumed cursor): zephon_released() and
  // Python's Pipeline.released.
  uint64_t released() const;

  // Collective checkpoint of the run: blocks until every rank of the run called it at
  // the same step and the leader merged the round, then returns the merged checkpoint
  // bytes (the same for every rank). Records the batches this rank has taken from Next(),
  // never prefetched ones. Errors name the missing ranks or the disagreeing counts.
  absl::StatusOr<std::string> Checkpoint(absl::Duration timeout);
  // Checkpoint, with the leader's whole answer: the bytes, where they were written, and
  // the round's warning (empty: none; e.g. a checkpoint taken mid-window).
  absl::StatusOr<proto::CheckpointResult> CheckpointRound(absl::Duration timeout);
  // Batches taken from Next() so far, released or not (what a checkpoint records:
  // CheckpointRequest.taken, RankProgress.taken).
  uint64_t taken() const;

  // The daemon's explain text for this rank's instance (stages, operators, queues, ring)
  // with node totals.
  absl::StatusOr<std::string> Explain(absl::Duration timeout) const;

  // Ends the lease and closes the connection to the daemon (the ring stays mapped until
  // the reader is destroyed). Idempotent. Afterwards Next, Release, Checkpoint and
  // Explain return FAILED_PRECONDITION.
  void Detach();

 private:
  AttachedReader() = default;

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<proto::Zephon::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<proto::AttachClientMessage, proto::AttachServerMessage>>
      stream_;
  proto::AttachReply reply_;
  std::unique_ptr<shm::RingReader> ring_;
  bool detached_ = false;
  uint32_t global_rank_ = 0;
  uint64_t next_round_ = 0;  // this rank's next checkpoint round
};

}  // namespace zephon::client

#endif  // ZEPHON_CLIENT_ATTACHED_READER_H_
