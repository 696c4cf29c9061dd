// File: shm/ring_reader.h
//
// RingReader: the client (trainer) side of a shared-memory batch ring. One RingReader
// owns one attached reader record (a lease handed out by zephond's AttachReader) and its
// own mappings of the ring's two sealed memfds: the data segment READ-ONLY (batches,
// descriptors, header) and the cursor segment read-write (its record, the release futex
// word). It sees every published batch, in seq order. Because both segments are sealed
// against shrinking (checked before mapping), a damaged ring gives an error, never
// SIGBUS.
//
// Thread safety: single-owner and thread-compatible; use it from one thread at a time.
//
// Memory ordering: when Acquire returns seq s, everything the producer wrote into that
// slot before publishing it is visible. Release(s) stores the consumed cursor with
// release, so every read this reader made of the slot happens-before the producer
// overwrites it.
//
// Lifetimes: SlotView data pointers stay valid (and unchanged) until that seq is
// Released; the mappings stay valid until the RingReader is destroyed, even if zephond
// closes the ring or dies.
#ifndef ZEPHON_SHM_RING_READER_H_
#define ZEPHON_SHM_RING_READER_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "shm/ring_layout.h"
#include "shm/segment.h"

namespace zephon::shm {

struct TensorView {
  std::string name;
  DType dtype;
  std::vector<uint64_t> shape;
  const void* data;  // inside the mapping; valid until the slot is released
  uint64_t bytes;
};

struct SlotView {
  uint64_t seq = 0;
  uint32_t flags = 0;  // SlotFlags
  uint32_t lane = 0;
  uint64_t lane_batch_index = 0;
  std::vector<TensorView> tensors;

  // The tensor called `name`, or nullptr.
  const TensorView* Find(const std::string& name) const;
};

class RingReader {
 public:
  // Maps the ring's segments (`fds`, as RingWriter::ReaderFds made them; taken over and
  // closed here) and validates them before trusting any field: both sealed against
  // shrinking (FAILED_PRECONDITION otherwise), magic, layout major (FAILED_PRECONDITION
  // naming both versions), header/total sizes and section offsets against the mappings,
  // geometry, the cursor segment's identity, generation == expected_generation (else
  // FAILED_PRECONDITION: a stale ring), ring state (ABORTED if poisoned, CANCELLED if
  // closed, UNAVAILABLE if not ready yet) and the lease (reader_index in range, record
  // attached with lease_epoch; else FAILED_PRECONDITION). Corrupt input gives an error,
  // never a crash. `name` is the ring's name, for messages. `producer_timeout`: how stale
  // the producer heartbeat may get before Acquire reports UNAVAILABLE.
  static absl::StatusOr<std::unique_ptr<RingReader>> Open(RingFds fds, const std::string& name,
                                                          uint32_t reader_index,
                                                          uint32_t lease_epoch,
                                                          uint64_t expected_generation,
                                                          absl::Duration producer_timeout);

  RingReader(const RingReader&) = delete;
  RingReader& operator=(const RingReader&) = delete;
  ~RingReader();

  // Loans the next seq in order. Several loans may be held at once (Acquire again
  // without releasing); holding slot_count of them stalls the producer.
  // Errors (all leave the reader usable; sticky ones repeat):
  //   ABORTED           ring poisoned: "rank R ... <reason>"; the job must restart.
  //   CANCELLED         ring closed by zephond and everything published was taken.
  //   OUT_OF_RANGE      "end of data": the producer published end-of-stream.
  //   UNAVAILABLE       the producer heartbeat is older than producer_timeout.
  //   DEADLINE_EXCEEDED nothing published within `timeout`; retrying is fine.
  //   FAILED_PRECONDITION the lease was revoked (detached or re-attached elsewhere).
  //   DATA_LOSS         the slot is corrupt (seq mismatch, tensor table out of bounds).
  absl::StatusOr<SlotView> Acquire(absl::Duration timeout);

  // Releases an acquired seq. Releases may come in any order; the shared consumed cursor
  // advances only over a contiguous prefix (the rest is buffered here). Wakes the
  // producer if it waits. INVALID_ARGUMENT if `seq` is not currently loaned.
  absl::Status Release(uint64_t seq);

  // The consumed cursor: every seq below it has been released (docs/design.md: a
  // released batch is consumed; "taken" is what Acquire hands out).
  uint64_t released() const { return consumed_; }
  // The seq the next Acquire returns.
  uint64_t next_seq() const { return next_seq_; }
  // Batches taken by Acquire, not counting the end-of-stream marker.
  uint64_t batches_taken() const { return end_of_stream_ ? next_seq_ - 1 : next_seq_; }
  uint64_t generation() const { return generation_; }
  uint32_t slot_count() const { return slot_count_; }
  // The whole mapping: TensorView::data pointers fall inside [mapping(), +mapping_bytes()).
  // Lets a binding wrap the mapping once and slice tensors out of it.
  // This is the read-only data segment; it starts with the RingHeader.
  const uint8_t* mapping() const { return data_->data(); }
  uint64_t mapping_bytes() const { return data_->size(); }
  // The release futex word (RingWriter::release_wakes), for benchmarks.
  uint32_t release_wakes() const {
    return reinterpret_cast<const CursorHeader*>(cursors_->data())
        ->release_wake.load(std::memory_order_relaxed);
  }

 private:
  RingReader(std::unique_ptr<Segment> data, std::unique_ptr<Segment> cursors,
             uint32_t reader_index, uint32_t lease_epoch, absl::Duration producer_timeout);
  const std::string& name() const { return data_->name(); }

  const RingHeader* header() const;
  ReaderRecord* record() const;
  absl::Status StateStatus() const;  // OK while ready (or closed with data left)
  absl::Status LeaseStatus() const;
  absl::StatusOr<SlotView> ReadSlot(uint64_t seq) const;

  // Constant after Open: a validated copy of the geometry, so a header corrupted later
  // cannot steer reads outside the mapping.
  const std::unique_ptr<Segment> data_;     // read-only mapping
  const std::unique_ptr<Segment> cursors_;  // read-write mapping
  const uint32_t reader_index_;
  const uint32_t lease_epoch_;
  const absl::Duration producer_timeout_;
  uint64_t generation_ = 0;
  uint32_t slot_count_ = 0;
  uint64_t slot_stride_ = 0;
  uint64_t slot_end_ = 0;  // usable bytes from a slot's start (table + payload)
  uint64_t reader_table_offset_ = 0;
  uint64_t descriptor_offset_ = 0;
  uint64_t payload_offset_ = 0;

  // Reader-local cursors.
  uint64_t consumed_ = 0;  // mirror of record()->consumed, which only we write
  uint64_t next_seq_ = 0;  // next seq to acquire
  bool end_of_stream_ = false;
  std::set<uint64_t> released_ahead_;  // released seqs above consumed_
};

}  // namespace zephon::shm

#endif  // ZEPHON_SHM_RING_READER_H_
