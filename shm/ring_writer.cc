#include "shm/ring_writer.h"

#include <sys/random.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "shm/futex.h"

namespace zephon::shm {
namespace {

// Producer spin iterations before sleeping: covers a reader releasing "right now"
// without burning a core next to the GPU feeders for long.
constexpr int kSpinIterations = 256;
// Longest single futex sleep: every wait re-checks close/poison at least this often.
constexpr absl::Duration kMaxSleep = absl::Milliseconds(100);

bool Gates(uint32_t state) {
  return state == static_cast<uint32_t>(ReaderState::kReserved) ||
         state == static_cast<uint32_t>(ReaderState::kAttached);
}

void CopyCString(char* dst, size_t capacity, std::string_view src) {
  const size_t n = std::min(src.size(), capacity - 1);
  std::memcpy(dst, src.data(), n);
  std::memset(dst + n, 0, capacity - n);
}

uint64_t RandomGeneration() {
  uint64_t value = 0;
  while (value == 0) {
    if (getrandom(&value, sizeof(value), 0) != sizeof(value)) {
      // No entropy syscall: fall back to a clock/pid mix; uniqueness, not secrecy, matters.
      value = MonotonicNowNs() * 0x9E3779B97F4A7C15ull ^ uint64_t(getpid()) << 32;
    }
  }
  return value;
}

absl::Status ValidateGeometry(const RingGeometry& g) {
  if (g.slot_count == 0 || g.slot_count > kMaxSlotCount ||
      (g.slot_count & (g.slot_count - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slot_count ", g.slot_count, " must be a power of two in [1, ", kMaxSlotCount, "]"));
  }
  if (g.reader_capacity == 0 || g.reader_capacity > kMaxReaderCapacity) {
    return absl::InvalidArgumentError(absl::StrCat("reader_capacity ", g.reader_capacity,
                                                   " must be in [1, ", kMaxReaderCapacity,
                                                   "]"));
  }
  if (g.slot_payload_bytes == 0 ||
      RoundUp(kTensorTableBytes + g.slot_payload_bytes, kPageBytes) > kMaxSlotStride) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slot_payload_bytes ", g.slot_payload_bytes, " must be nonzero and the slot < 4 GiB"));
  }
  return absl::OkStatus();
}

}  // namespace

// ---- SlotWriter -----------------------------------------------------------------------

SlotWriter::SlotWriter(SlotWriter&& other) noexcept { *this = std::move(other); }

SlotWriter& SlotWriter::operator=(SlotWriter&& other) noexcept {
  if (this != &other) {
    if (writer_ != nullptr) writer_->AbandonLoan(seq_);
    writer_ = std::exchange(other.writer_, nullptr);
    seq_ = other.seq_;
    slot_ = other.slot_;
    slot_end_ = other.slot_end_;
    data_end_ = other.data_end_;
    tensor_count_ = other.tensor_count_;
    flags_ = other.flags_;
    lane_ = other.lane_;
    lane_batch_index_ = other.lane_batch_index_;
  }
  return *this;
}

SlotWriter::~SlotWriter() {
  if (writer_ != nullptr) writer_->AbandonLoan(seq_);
}

absl::StatusOr<void*> SlotWriter::AddTensor(std::string_view name, DType dtype,
                                            absl::Span<const uint64_t> shape) {
  if (writer_ == nullptr) return absl::FailedPreconditionError("empty SlotWriter");
  if (name.empty() || name.size() > kTensorNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor name '", std::string(name), "' must be 1..", kTensorNameBytes, " bytes"));
  }
  if (DTypeSize(dtype) == 0) return absl::InvalidArgumentError("invalid dtype");
  if (shape.size() > kMaxTensorRank) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", std::string(name), "' has rank ",
                                                   shape.size(), " > ", kMaxTensorRank));
  }
  if (tensor_count_ == kMaxTensorsPerSlot) {
    return absl::ResourceExhaustedError(
        absl::StrCat("a slot holds at most ", kMaxTensorsPerSlot, " tensors"));
  }
  uint64_t bytes = DTypeSize(dtype);
  for (uint64_t dim : shape) {
    if (__builtin_mul_overflow(bytes, dim, &bytes)) bytes = ~0ull;
  }
  const uint64_t offset = RoundUp(data_end_, kTensorAlignment);
  const uint64_t capacity = slot_end_ - kTensorTableBytes;
  if (bytes > slot_end_ || offset + bytes > slot_end_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "tensor '", std::string(name), "' needs ", bytes, " bytes at payload offset ",
        offset - kTensorTableBytes, " but the slot payload capacity is ", capacity,
        " bytes; raise slot_payload_bytes"));
  }
  TensorEntry entry{};
  std::memcpy(entry.name, name.data(), name.size());
  entry.dtype = static_cast<uint8_t>(dtype);
  entry.ndim = static_cast<uint8_t>(shape.size());
  entry.data_offset = static_cast<uint32_t>(offset);
  std::copy(shape.begin(), shape.end(), entry.shape);
  std::memcpy(slot_ + tensor_count_ * kTensorEntryBytes, &entry, sizeof(entry));
  ++tensor_count_;
  data_end_ = offset + bytes;
  return static_cast<void*>(slot_ + offset);
}

// ---- RingWriter -----------------------------------------------------------------------

RingWriter::RingWriter(std::unique_ptr<Segment> data, std::unique_ptr<Segment> cursors,
                       const RingGeometry& geometry, const RingSections& sections,
                       uint64_t generation)
    : data_(std::move(data)),
      cursors_(std::move(cursors)),
      geometry_(geometry),
      sections_(sections),
      generation_(generation) {}

absl::StatusOr<std::unique_ptr<RingWriter>> RingWriter::Create(const std::string& name,
                                                               const RingGeometry& geometry,
                                                               std::string_view label,
                                                               Env* env) {
  if (absl::Status s = ValidateGeometry(geometry); !s.ok()) return s;
  const RingSections sections = ComputeSections(
      geometry.slot_count, geometry.reader_capacity, geometry.slot_payload_bytes);
  absl::StatusOr<std::unique_ptr<Segment>> segment =
      Segment::Create(name, sections.total_bytes, env);
  if (!segment.ok()) return segment.status();
  absl::StatusOr<std::unique_ptr<Segment>> cursors =
      Segment::Create(absl::StrCat(name, ".cursors"), sections.cursor_bytes, env);
  if (!cursors.ok()) return cursors.status();
  uint8_t* base = (*segment)->data();
  uint8_t* cursor_base = (*cursors)->data();

  // The segment is zero-filled, so state reads kInitializing until the end.
  auto* h = new (base) RingHeader();
  h->magic = kRingMagic;
  h->major = kLayoutMajor;
  h->minor = kLayoutMinor;
  h->header_bytes = kHeaderBytes;
  h->total_bytes = sections.total_bytes;
  h->generation = RandomGeneration();
  h->slot_count = geometry.slot_count;
  h->reader_capacity = geometry.reader_capacity;
  h->slot_stride = sections.slot_stride;
  h->slot_payload_bytes = geometry.slot_payload_bytes;
  h->reader_table_offset = sections.reader_table_offset;
  h->cursor_bytes = sections.cursor_bytes;
  h->descriptor_offset = sections.descriptor_offset;
  h->payload_offset = sections.payload_offset;
  h->poison_rank = -1;
  h->producer_pid = getpid();
  h->producer_heartbeat_ns.store(MonotonicNowNs(), std::memory_order_relaxed);
  CopyCString(h->label, kLabelBytes, label);
  auto* c = new (cursor_base) CursorHeader();
  c->magic = kCursorMagic;
  c->major = kLayoutMajor;
  c->minor = kLayoutMinor;
  c->reader_capacity = geometry.reader_capacity;
  c->generation = h->generation;
  c->total_bytes = sections.cursor_bytes;
  for (uint32_t i = 0; i < geometry.reader_capacity; ++i) {
    new (cursor_base + sections.reader_table_offset + uint64_t{i} * kReaderRecordBytes) ReaderRecord();
  }
  for (uint32_t i = 0; i < geometry.slot_count; ++i) {
    auto* d = new (base + sections.descriptor_offset + uint64_t{i} * kDescriptorBytes)
        SlotDescriptor();
    d->seq.store(kNoSeq, std::memory_order_relaxed);
  }
  const uint64_t generation = h->generation;
  // Last, with release: a reader that sees kReady sees every field above.
  h->state.store(static_cast<uint32_t>(RingState::kReady), std::memory_order_release);
  // From here on only our own mapping can write the data segment: readers get it
  // read-only, and not even a reader of our uid reopening it through /proc can map it
  // writable. The cursor segment stays writable (readers store their cursors there).
  if (absl::Status s = (*segment)->Seal(/*forbid_new_writers=*/true); !s.ok()) return s;
  if (absl::Status s = (*cursors)->Seal(/*forbid_new_writers=*/false); !s.ok()) return s;
  return std::unique_ptr<RingWriter>(new RingWriter(*std::move(segment), *std::move(cursors),
                                                    geometry, sections, generation));
}

RingWriter::~RingWriter() { Close(); }

absl::StatusOr<RingFds> RingWriter::ReaderFds() const {
  RingFds fds;
  absl::StatusOr<UniqueFd> data = data_->OpenReadOnly();
  if (!data.ok()) return data.status();
  absl::StatusOr<UniqueFd> cursors = cursors_->Dup();
  if (!cursors.ok()) return cursors.status();
  fds.data = *std::move(data);
  fds.cursors = *std::move(cursors);
  return fds;
}

ReaderRecord* RingWriter::record(uint32_t index) const {
  return reinterpret_cast<ReaderRecord*>(cursors_->data() + sections_.reader_table_offset +
                                         uint64_t{index} * kReaderRecordBytes);
}

SlotDescriptor* RingWriter::descriptor(uint64_t seq) const {
  return reinterpret_cast<SlotDescriptor*>(
      data_->data() + sections_.descriptor_offset +
      (seq & (geometry_.slot_count - 1)) * kDescriptorBytes);
}

uint8_t* RingWriter::slot(uint64_t seq) const {
  return data_->data() + sections_.payload_offset +
         (seq & (geometry_.slot_count - 1)) * sections_.slot_stride;
}

RingState RingWriter::state() const {
  return static_cast<RingState>(header()->state.load(std::memory_order_acquire));
}

absl::Status RingWriter::NotReadyStatus() const {
  const RingHeader* h = header();
  switch (state()) {
    case RingState::kReady:
      return absl::OkStatus();
    case RingState::kPoisoned:
      return absl::CancelledError(absl::StrCat("ring ", name(), " is poisoned: rank ",
                                               h->poison_rank, ": ", h->poison_detail));
    case RingState::kClosed:
      return absl::CancelledError(absl::StrCat("ring ", name(), " is closed"));
    default:
      return absl::FailedPreconditionError(absl::StrCat("ring ", name(), " is not ready"));
  }
}

bool RingWriter::SlotFree(uint64_t seq, uint32_t* lagging) const {
  // Acquire on state and consumed: pairs with the reader's release store of consumed, so
  // the reader's last reads of the old slot contents happen-before our overwrite.
  for (uint32_t i = 0; i < geometry_.reader_capacity; ++i) {
    const ReaderRecord* r = record(i);
    if (!Gates(r->state.load(std::memory_order_acquire))) continue;
    if (r->consumed.load(std::memory_order_seq_cst) + geometry_.slot_count <= seq) {
      if (lagging != nullptr) *lagging = i;
      return false;
    }
  }
  return true;
}

absl::Status RingWriter::CheckStartLocked(uint64_t start_seq) const {
  if (absl::Status s = NotReadyStatus(); !s.ok()) {
    return absl::FailedPreconditionError(s.message());
  }
  // Seq start_seq is overwritten by the loan of start_seq + slot_count.
  if (high_water_ > start_seq + geometry_.slot_count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ring ", name(), ": seq ", start_seq, " was already overwritten (next seq to loan ",
        high_water_, ", ", geometry_.slot_count, " slots); resume from a later step"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> RingWriter::ReserveReader(uint64_t start_seq) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckStartLocked(start_seq); !s.ok()) return s;
  for (uint32_t i = 0; i < geometry_.reader_capacity; ++i) {
    ReaderRecord* r = record(i);
    const auto st = static_cast<ReaderState>(r->state.load(std::memory_order_relaxed));
    if (st != ReaderState::kFree && st != ReaderState::kDetached) continue;
    r->rank = -1;
    r->pid = 0;
    r->waiting.store(0, std::memory_order_relaxed);
    r->consumed.store(start_seq, std::memory_order_relaxed);
    // Release: a producer that sees kReserved sees the cursor it gates on.
    r->state.store(static_cast<uint32_t>(ReaderState::kReserved), std::memory_order_release);
    return i;
  }
  return absl::ResourceExhaustedError(absl::StrCat(
      "ring ", name(), ": all ", geometry_.reader_capacity, " reader records are in use"));
}

absl::StatusOr<ReaderLease> RingWriter::AttachReader(int32_t rank, int64_t pid,
                                                     uint64_t start_seq,
                                                     std::optional<uint32_t> reserved_index) {
  // Holding mu_ makes the overwrite check atomic with Loan's grant (also under mu_).
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckStartLocked(start_seq); !s.ok()) return s;
  std::optional<uint32_t> index;
  if (reserved_index) {
    if (*reserved_index >= geometry_.reader_capacity ||
        record(*reserved_index)->state.load(std::memory_order_relaxed) !=
            static_cast<uint32_t>(ReaderState::kReserved)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "ring ", name(), ": reader record ", *reserved_index, " is not reserved"));
    }
    index = reserved_index;
  } else {
    for (uint32_t i = 0; i < geometry_.reader_capacity && !index; ++i) {
      const auto st = static_cast<ReaderState>(record(i)->state.load(std::memory_order_relaxed));
      if (st == ReaderState::kFree || st == ReaderState::kDetached) index = i;
    }
    if (!index) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "ring ", name(), ": all ", geometry_.reader_capacity, " reader records are in use"));
    }
  }
  ReaderRecord* r = record(*index);
  r->rank = rank;
  r->pid = pid;
  r->waiting.store(0, std::memory_order_relaxed);
  r->heartbeat_ns.store(MonotonicNowNs(), std::memory_order_relaxed);
  r->consumed.store(start_seq, std::memory_order_relaxed);
  const uint32_t epoch = r->lease_epoch.load(std::memory_order_relaxed) + 1;
  r->lease_epoch.store(epoch, std::memory_order_relaxed);
  // Release: the reader (and the producer) that see kAttached see the fields above.
  r->state.store(static_cast<uint32_t>(ReaderState::kAttached), std::memory_order_release);
  return ReaderLease{*index, epoch};
}

void RingWriter::DetachReader(uint32_t index) {
  {
    absl::MutexLock lock(&mu_);
    if (index >= geometry_.reader_capacity) return;
    uint32_t expected = static_cast<uint32_t>(ReaderState::kAttached);
    record(index)->state.compare_exchange_strong(
        expected, static_cast<uint32_t>(ReaderState::kDetached), std::memory_order_acq_rel);
  }
  WakeEveryone();  // a gate vanished: the producer may proceed now
}

void RingWriter::ReleaseReservation(uint32_t index) {
  {
    absl::MutexLock lock(&mu_);
    if (index >= geometry_.reader_capacity) return;
    uint32_t expected = static_cast<uint32_t>(ReaderState::kReserved);
    record(index)->state.compare_exchange_strong(
        expected, static_cast<uint32_t>(ReaderState::kFree), std::memory_order_acq_rel);
  }
  WakeEveryone();
}

void RingWriter::MarkReaderDead(uint32_t index, int32_t rank, std::string_view reason) {
  {
    absl::MutexLock lock(&mu_);
    if (index < geometry_.reader_capacity) {
      record(index)->state.store(static_cast<uint32_t>(ReaderState::kDead),
                                 std::memory_order_release);
    }
  }
  Poison(rank, reason);
}

absl::StatusOr<SlotWriter> RingWriter::Loan(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  uint64_t seq;
  {
    absl::MutexLock lock(&mu_);
    if (loan_outstanding_) {
      return absl::FailedPreconditionError(
          absl::StrCat("ring ", name(), ": seq ", next_seq_, " is still loaned"));
    }
    seq = next_seq_;
  }
  RingHeader* h = header();
  for (int spins = 0;; ++spins) {
    if (absl::Status s = NotReadyStatus(); !s.ok()) return s;
    {
      // The grant happens under mu_ so AttachReader's overwrite check cannot interleave.
      absl::MutexLock lock(&mu_);
      if (SlotFree(seq)) {
        loan_outstanding_ = true;
        high_water_ = std::max(high_water_, seq + 1);
        return SlotWriter(this, seq, slot(seq), kTensorTableBytes + geometry_.slot_payload_bytes);
      }
    }
    if (spins < kSpinIterations) {
      CpuRelax();
      continue;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      uint32_t lagging = 0;
      if (SlotFree(seq, &lagging)) continue;  // released just now
      const ReaderRecord* r = record(lagging);
      return absl::DeadlineExceededError(absl::StrCat(
          "ring ", name(), ": no free slot for seq ", seq, " within ",
          absl::FormatDuration(timeout), "; reader ", lagging, " (rank ", r->rank,
          ") has consumed only up to seq ", r->consumed.load(std::memory_order_relaxed)));
    }
    // Dekker handshake with Release(): flag, snapshot the word, re-check, then sleep on
    // the snapshot. A reader that releases after our re-check sees the flag and wakes us.
    // The wake word lives in the cursor segment, where readers can write.
    std::atomic<uint32_t>* wake = &cursor_header()->release_wake;
    h->release_waiting.store(1, std::memory_order_seq_cst);
    const uint32_t word = wake->load(std::memory_order_seq_cst);
    if (!SlotFree(seq)) FutexWait(wake, word, std::min(left, kMaxSleep));
    h->release_waiting.store(0, std::memory_order_relaxed);
  }
}

void RingWriter::AbandonLoan(uint64_t seq) {
  absl::MutexLock lock(&mu_);
  if (loan_outstanding_ && next_seq_ == seq) loan_outstanding_ = false;
}

absl::Status RingWriter::Publish(SlotWriter&& slot) {
  if (slot.writer_ != this) {
    return absl::InvalidArgumentError("Publish: slot is empty or belongs to another ring");
  }
  const uint64_t seq = slot.seq_;
  {
    absl::MutexLock lock(&mu_);
    if (!loan_outstanding_ || next_seq_ != seq) {
      return absl::InvalidArgumentError(absl::StrCat("Publish: seq ", seq, " is not loaned"));
    }
  }
  if (absl::Status s = NotReadyStatus(); !s.ok()) return s;  // slot dtor abandons the loan
  SlotDescriptor* d = descriptor(seq);
  d->payload_bytes = slot.data_end_;
  d->lane_batch_index = slot.lane_batch_index_;
  d->flags = slot.flags_;
  d->tensor_count = slot.tensor_count_;
  d->lane = slot.lane_;
  d->table_offset = 0;
  // Release: the slot contents and descriptor fields are visible to whoever sees seq.
  d->seq.store(seq, std::memory_order_release);
  slot.writer_ = nullptr;  // published, nothing to abandon
  {
    absl::MutexLock lock(&mu_);
    loan_outstanding_ = false;
    next_seq_ = seq + 1;
  }
  RingHeader* h = header();
  // seq_cst: the Dekker pair with a reader's (waiting = 1; read word; read published).
  h->published.store(seq + 1, std::memory_order_seq_cst);
  h->producer_heartbeat_ns.store(MonotonicNowNs(), std::memory_order_relaxed);
  h->publish_wake.fetch_add(1, std::memory_order_seq_cst);
  for (uint32_t i = 0; i < geometry_.reader_capacity; ++i) {
    if (record(i)->waiting.load(std::memory_order_seq_cst) != 0) {
      FutexWakeAll(&h->publish_wake);
      break;
    }
  }
  return absl::OkStatus();
}

absl::Status RingWriter::PublishEndOfStream(absl::Duration timeout) {
  absl::StatusOr<SlotWriter> slot = Loan(timeout);
  if (!slot.ok()) return slot.status();
  slot->set_flags(kSlotEndOfStream);
  return Publish(*std::move(slot));
}

void RingWriter::Heartbeat() {
  header()->producer_heartbeat_ns.store(MonotonicNowNs(), std::memory_order_relaxed);
}

void RingWriter::WakeEveryone() {
  RingHeader* h = header();
  CursorHeader* c = cursor_header();
  h->publish_wake.fetch_add(1, std::memory_order_seq_cst);
  c->release_wake.fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(&h->publish_wake);
  FutexWakeAll(&c->release_wake);
}

void RingWriter::Poison(int32_t rank, std::string_view reason) {
  {
    absl::MutexLock lock(&mu_);
    RingHeader* h = header();
    if (state() == RingState::kPoisoned) return;  // first reason wins
    h->poison_rank = rank;
    CopyCString(h->poison_reason, kPoisonReasonBytes, reason);
    CopyCString(h->poison_detail, kPoisonDetailBytes, reason);
    // Release: readers that see kPoisoned see rank and reason.
    h->state.store(static_cast<uint32_t>(RingState::kPoisoned), std::memory_order_release);
  }
  WakeEveryone();
}

void RingWriter::Close() {
  {
    absl::MutexLock lock(&mu_);
    uint32_t expected = static_cast<uint32_t>(RingState::kReady);
    header()->state.compare_exchange_strong(
        expected, static_cast<uint32_t>(RingState::kClosed), std::memory_order_acq_rel);
  }
  WakeEveryone();
}

uint64_t RingWriter::published() const {
  return header()->published.load(std::memory_order_acquire);
}

uint64_t RingWriter::MinGatingConsumed() const {
  uint64_t min = published();
  for (uint32_t i = 0; i < geometry_.reader_capacity; ++i) {
    const ReaderRecord* r = record(i);
    if (Gates(r->state.load(std::memory_order_acquire))) {
      min = std::min(min, r->consumed.load(std::memory_order_acquire));
    }
  }
  return min;
}

std::vector<ReaderInfo> RingWriter::Readers() const {
  absl::MutexLock lock(&mu_);  // rank/pid/epoch are written under mu_
  std::vector<ReaderInfo> out;
  for (uint32_t i = 0; i < geometry_.reader_capacity; ++i) {
    const ReaderRecord* r = record(i);
    const auto st = static_cast<ReaderState>(r->state.load(std::memory_order_acquire));
    if (st == ReaderState::kFree) continue;
    out.push_back(ReaderInfo{i, st, r->rank, r->pid,
                             r->lease_epoch.load(std::memory_order_relaxed),
                             r->consumed.load(std::memory_order_acquire),
                             r->waiting.load(std::memory_order_relaxed) != 0});
  }
  return out;
}

}  // namespace zephon::shm
