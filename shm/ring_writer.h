// File: shm/ring_writer.h
//
// RingWriter: the producer (zephond) side of one shared-memory batch ring: one producer,
// N readers, every reader sees every batch (Disruptor-style per-reader cursors). It owns
// the ring's two sealed memfds (data and cursor segments) and hands readers their own
// descriptors (ReaderFds): the data segment read-only, the cursor segment read-write.
// Nothing a reader does with those can resize either segment, so no reader can crash the
// producer with SIGBUS. See shm/RING_FORMAT.md for the layout and the protocol.
//
// Thread safety:
//   * Producer methods (Loan, Publish, PublishEndOfStream) are called by ONE producer
//     thread.
//   * Control-plane methods (Reserve/Attach/Detach/ReleaseReservation/MarkReaderDead,
//     Heartbeat, Poison, Close, ReaderFds) and observers are thread-safe and may run
//     concurrently with the producer. The writer's bookkeeping is guarded by an
//     in-process mutex; nothing in shared memory is ever locked.
//
// Memory ordering: everything a producer writes into a slot (tensor table, data,
// descriptor fields) happens-before a reader's Acquire of that seq returns (descriptor
// seq and `published` are stored with release/seq_cst, read with acquire). Everything a
// reader did with a slot happens-before the producer reuses it (consumed cursors are
// stored with release and loaded with acquire before a loan is granted).
#ifndef ZEPHON_SHM_RING_WRITER_H_
#define ZEPHON_SHM_RING_WRITER_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "shm/ring_layout.h"
#include "shm/segment.h"
#include "shm/unique_fd.h"

namespace zephon::shm {

struct RingGeometry {
  uint32_t slot_count;          // power of two, 1..kMaxSlotCount
  uint64_t slot_payload_bytes;  // tensor data capacity per slot (after the tensor table)
  uint32_t reader_capacity;     // 1..kMaxReaderCapacity
};

struct ReaderLease {
  uint32_t index;
  uint32_t lease_epoch;
};

struct ReaderInfo {
  uint32_t index;
  ReaderState state;
  int32_t rank;
  int64_t pid;
  uint32_t lease_epoch;
  uint64_t consumed;
  bool waiting;  // the reader is (about to be) asleep waiting for a batch: none is ready
};

class RingWriter;

// One loaned slot, filled in place and handed back through RingWriter::Publish. Movable,
// not copyable; a moved-from SlotWriter is empty. Destroying an unpublished SlotWriter
// abandons the loan: the next Loan hands out the same seq again.
// REQUIRES: the RingWriter outlives its SlotWriters; used by the producer thread only.
class SlotWriter {
 public:
  SlotWriter(SlotWriter&& other) noexcept;
  SlotWriter& operator=(SlotWriter&& other) noexcept;
  SlotWriter(const SlotWriter&) = delete;
  SlotWriter& operator=(const SlotWriter&) = delete;
  ~SlotWriter();

  // Reserves a 64-byte-aligned region for a tensor and returns a pointer to it inside
  // the slot, valid until Publish. Errors: INVALID_ARGUMENT (empty or >24-byte name,
  // rank > 4, invalid dtype), RESOURCE_EXHAUSTED (more than 8 tensors, or the data does
  // not fit: the message names bytes needed and the slot's capacity).
  absl::StatusOr<void*> AddTensor(std::string_view name, DType dtype,
                                  absl::Span<const uint64_t> shape);

  void set_lane(uint32_t lane) { lane_ = lane; }
  void set_lane_batch_index(uint64_t index) { lane_batch_index_ = index; }
  void set_flags(uint32_t flags) { flags_ = flags; }  // SlotFlags
  uint64_t seq() const { return seq_; }
  bool empty() const { return writer_ == nullptr; }

 private:
  friend class RingWriter;
  SlotWriter(RingWriter* writer, uint64_t seq, uint8_t* slot, uint64_t slot_end)
      : writer_(writer), seq_(seq), slot_(slot), slot_end_(slot_end) {}

  RingWriter* writer_ = nullptr;  // null when empty
  uint64_t seq_ = 0;
  uint8_t* slot_ = nullptr;      // slot start in the mapping
  uint64_t slot_end_ = 0;        // usable bytes from slot start: table + payload capacity
  uint64_t data_end_ = kTensorTableBytes;  // next free byte, relative to the slot start
  uint32_t tensor_count_ = 0;
  uint32_t flags_ = 0;
  uint32_t lane_ = 0;
  uint64_t lane_batch_index_ = 0;
};

class RingWriter {
 public:
  // Creates and initialises a ring: memfds `name` (data) and `name`.cursors, both sealed
  // against resizing; the data segment is also sealed against any new writable mapping
  // (F_SEAL_FUTURE_WRITE) once initialised. The header, with a random nonzero
  // generation, is complete before the state becomes kReady (stored last, with release).
  // `label` (the instance id) is copied into the header for humans.
  // The memfds come from `env` (Segment::Create).
  // Errors: INVALID_ARGUMENT (geometry outside limits, slot_count not a power of two),
  // plus everything Segment::Create and Segment::Seal return.
  static absl::StatusOr<std::unique_ptr<RingWriter>> Create(const std::string& name,
                                                            const RingGeometry& geometry,
                                                            std::string_view label,
                                                            Env* env = Env::Default());

  // Closes the ring (readers drain, then see CANCELLED). The memory is freed when the
  // last reader unmaps it. REQUIRES: no SlotWriter outstanding.
  ~RingWriter();
  RingWriter(const RingWriter&) = delete;
  RingWriter& operator=(const RingWriter&) = delete;

  // ---- Control plane (thread-safe) ----------------------------------------------------

  // Declares a not-yet-attached reader whose cursor is `start_seq`; it gates the
  // producer from now on, so a peer that attaches late still sees batch start_seq.
  // Errors: FAILED_PRECONDITION (start_seq already overwritten or being written, or the
  // ring is not ready), RESOURCE_EXHAUSTED (reader table full).
  absl::StatusOr<uint32_t> ReserveReader(uint64_t start_seq) ABSL_LOCKS_EXCLUDED(mu_);

  // Turns `reserved_index` (or, if absent, a free record) into an attached lease with a
  // bumped epoch and cursor `start_seq`. The "not yet overwritten" check is atomic with
  // the producer's loan decision: FAILED_PRECONDITION if the next seq to loan exceeds
  // start_seq + slot_count, if the index is not reserved, or if the ring is not ready.
  // RESOURCE_EXHAUSTED if no record is free.
  absl::StatusOr<ReaderLease> AttachReader(int32_t rank, int64_t pid, uint64_t start_seq,
                                           std::optional<uint32_t> reserved_index)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The reader left cleanly: it stops gating and its record becomes reusable. No-op
  // unless the record is attached.
  void DetachReader(uint32_t index) ABSL_LOCKS_EXCLUDED(mu_);
  // Drops a reservation that was never attached. No-op unless the record is reserved.
  void ReleaseReservation(uint32_t index) ABSL_LOCKS_EXCLUDED(mu_);
  // The reader's process is gone: marks it dead and poisons the ring with its rank.
  void MarkReaderDead(uint32_t index, int32_t rank, std::string_view reason)
      ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Producer (one thread) ---------------------------------------------------------

  // Loans the slot for the next seq once every gating (reserved or attached) reader has
  // released the seq it last held. Spins briefly, then sleeps on the release futex,
  // re-checking at least every 100 ms. Errors: CANCELLED (ring closed or poisoned),
  // DEADLINE_EXCEEDED (names the lagging reader), FAILED_PRECONDITION (a loan is already
  // outstanding).
  absl::StatusOr<SlotWriter> Loan(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  // Publishes a loaned slot: descriptor seq (release), then published = seq + 1, then
  // wakes sleeping readers. Errors: INVALID_ARGUMENT (empty slot or not this writer's
  // current loan), CANCELLED (ring closed or poisoned; the slot is not published).
  absl::Status Publish(SlotWriter&& slot) ABSL_LOCKS_EXCLUDED(mu_);

  // Loans and publishes an empty slot flagged kSlotEndOfStream.
  absl::Status PublishEndOfStream(absl::Duration timeout) ABSL_LOCKS_EXCLUDED(mu_);

  // ---- Lifecycle (thread-safe) -------------------------------------------------------

  // Refreshes producer_heartbeat_ns; call from a timer at least 5x per reader timeout.
  void Heartbeat();
  // Sticky: state kPoisoned with rank and reason; wakes every waiter. First call wins.
  void Poison(int32_t rank, std::string_view reason) ABSL_LOCKS_EXCLUDED(mu_);
  // Sticky: state kClosed (unless poisoned); wakes every waiter.
  void Close() ABSL_LOCKS_EXCLUDED(mu_);

  // Fresh descriptors for one reader process: the data segment reopened O_RDONLY (its
  // holder cannot truncate it or map it writable) and a dup of the cursor segment.
  // Errors: INTERNAL/RESOURCE_EXHAUSTED (out of fds, /proc not mounted).
  absl::StatusOr<RingFds> ReaderFds() const;

  // ---- Observers (thread-safe) -------------------------------------------------------
  uint64_t published() const;
  // Smallest consumed cursor among gating readers; published() when none gates.
  uint64_t MinGatingConsumed() const;
  std::vector<ReaderInfo> Readers() const;
  uint64_t generation() const { return generation_; }
  // The release futex word: how many releases found the producer (about to be) asleep.
  // For benchmarks; any reader may also bump it.
  uint32_t release_wakes() const {
    return cursor_header()->release_wake.load(std::memory_order_relaxed);
  }
  // Bytes of both segments (header, descriptors, payload slots; cursor header, reader
  // table): the memory the ring pins.
  uint64_t total_bytes() const { return data_->size() + cursors_->size(); }
  // The data memfd's name ("memfd:<name>" in /proc/<pid>/fd).
  const std::string& name() const { return data_->name(); }
  RingState state() const;

  // Test seam: the producer's writable mapping of the data segment, for tests that
  // corrupt a header or slot on purpose (nobody else can map it writable).
  uint8_t* TEST_data() const { return data_->data(); }

 private:
  friend class SlotWriter;
  RingWriter(std::unique_ptr<Segment> data, std::unique_ptr<Segment> cursors,
             const RingGeometry& geometry, const RingSections& sections, uint64_t generation);

  RingHeader* header() const { return reinterpret_cast<RingHeader*>(data_->data()); }
  CursorHeader* cursor_header() const {
    return reinterpret_cast<CursorHeader*>(cursors_->data());
  }
  ReaderRecord* record(uint32_t index) const;
  SlotDescriptor* descriptor(uint64_t seq) const;
  uint8_t* slot(uint64_t seq) const;

  // True when every gating reader has released seq - slot_count. With `lagging` set,
  // reports the first reader that blocks it.
  bool SlotFree(uint64_t seq, uint32_t* lagging = nullptr) const;
  absl::Status CheckStartLocked(uint64_t start_seq) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status NotReadyStatus() const;
  void AbandonLoan(uint64_t seq) ABSL_LOCKS_EXCLUDED(mu_);
  void WakeEveryone();

  // Constant after construction.
  const std::unique_ptr<Segment> data_;     // header, descriptors, payload
  const std::unique_ptr<Segment> cursors_;  // cursor header, reader table
  const RingGeometry geometry_;
  const RingSections sections_;
  const uint64_t generation_;

  mutable absl::Mutex mu_;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;    // seq the next Loan hands out
  uint64_t high_water_ ABSL_GUARDED_BY(mu_) = 0;  // one past the highest seq ever loaned
  bool loan_outstanding_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zephon::shm

#endif  // ZEPHON_SHM_RING_WRITER_H_
