#include "shm/ring_reader.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "shm/futex.h"

namespace zephon::shm {
namespace {

// Reader spin iterations before sleeping on the publish futex.
constexpr int kSpinIterations = 256;
// Longest single futex sleep: state, lease and heartbeat are re-checked this often.
constexpr absl::Duration kMaxSleep = absl::Milliseconds(100);

absl::Status Corrupt(const std::string& name, const std::string& what) {
  return absl::FailedPreconditionError(
      absl::StrCat("ring ", name, " has an invalid header: ", what));
}

// `offset + count * unit <= limit` without overflow.
bool FitsIn(uint64_t offset, uint64_t count, uint64_t unit, uint64_t limit) {
  uint64_t bytes, end;
  return !__builtin_mul_overflow(count, unit, &bytes) &&
         !__builtin_add_overflow(offset, bytes, &end) && end <= limit;
}

// Everything except ring state and lease. Reads each field once into a local.
// `mapping_bytes`/`cursor_mapping_bytes`: sizes of the data and cursor mappings.
absl::Status ValidateHeader(const std::string& name, const RingHeader& h,
                            uint64_t mapping_bytes, uint64_t cursor_mapping_bytes,
                            uint64_t expected_generation) {
  const uint32_t state = h.state.load(std::memory_order_acquire);
  if (h.magic != kRingMagic) {
    if (state == static_cast<uint32_t>(RingState::kInitializing)) {
      return absl::UnavailableError(absl::StrCat("ring ", name, " is not initialised yet"));
    }
    return Corrupt(name, "bad magic (not a Zephon ring)");
  }
  if (h.major != kLayoutMajor) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ring ", name, " has layout version ", h.major, ".", h.minor,
        " but this reader supports major version ", kLayoutMajor, "; upgrade the older side"));
  }
  const uint64_t total = h.total_bytes;
  const uint64_t header_bytes = h.header_bytes;
  if (total > mapping_bytes) {
    return Corrupt(name, absl::StrCat("total_bytes ", total, " exceeds the mapping (",
                                      mapping_bytes, " bytes)"));
  }
  if (header_bytes < kHeaderBytes || header_bytes > total) {
    return Corrupt(name, absl::StrCat("header_bytes ", header_bytes, " out of range"));
  }
  const uint32_t slots = h.slot_count;
  const uint32_t readers = h.reader_capacity;
  const uint64_t stride = h.slot_stride;
  const uint64_t payload = h.slot_payload_bytes;
  if (slots == 0 || slots > kMaxSlotCount || (slots & (slots - 1)) != 0) {
    return Corrupt(name, absl::StrCat("slot_count ", slots, " is not a power of two <= ",
                                      kMaxSlotCount));
  }
  if (readers == 0 || readers > kMaxReaderCapacity) {
    return Corrupt(name, absl::StrCat("reader_capacity ", readers, " out of range"));
  }
  if (stride == 0 || stride % kPageBytes != 0 || stride > kMaxSlotStride ||
      payload > kMaxSlotStride || kTensorTableBytes + payload > stride) {
    return Corrupt(name, absl::StrCat("slot_stride ", stride, " / slot_payload_bytes ",
                                      payload, " inconsistent"));
  }
  const uint64_t rt = h.reader_table_offset, desc = h.descriptor_offset,
                 pay = h.payload_offset, cursor_bytes = h.cursor_bytes;
  if (cursor_bytes > cursor_mapping_bytes || rt < kCursorHeaderBytes ||
      rt % kReaderRecordBytes != 0 || !FitsIn(rt, readers, kReaderRecordBytes, cursor_bytes)) {
    return Corrupt(name, absl::StrCat("reader table (offset ", rt, ", ", readers,
                                      " records) does not fit in the cursor segment (",
                                      cursor_bytes, " of ", cursor_mapping_bytes, " bytes)"));
  }
  if (desc < header_bytes || desc % kDescriptorBytes != 0 ||
      !FitsIn(desc, slots, kDescriptorBytes, pay) || pay % kPageBytes != 0 ||
      !FitsIn(pay, slots, stride, total)) {
    return Corrupt(name, absl::StrCat("section offsets (descriptors ", desc, ", payload ", pay,
                                      ") do not fit in ", total, " bytes"));
  }
  if (h.generation != expected_generation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ring ", name, " has generation ", h.generation, ", expected ", expected_generation,
        ": stale segment, attach again through zephond"));
  }
  return absl::OkStatus();
}

// The cursor segment must belong to the same ring as the data segment: a reader handed
// a mismatched pair would gate or wake the wrong producer.
absl::Status ValidateCursorHeader(const std::string& name, const CursorHeader& c,
                                  const RingHeader& h) {
  if (c.magic != kCursorMagic || c.major != kLayoutMajor || c.generation != h.generation ||
      c.reader_capacity != h.reader_capacity) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ring ", name, ": the cursor segment does not belong to this ring (magic ", c.magic,
        ", major ", c.major, ", generation ", c.generation, " vs ", h.generation,
        "); attach again through zephond"));
  }
  return absl::OkStatus();
}

}  // namespace

const TensorView* SlotView::Find(const std::string& name) const {
  for (const TensorView& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

RingReader::RingReader(std::unique_ptr<Segment> data, std::unique_ptr<Segment> cursors,
                       uint32_t reader_index, uint32_t lease_epoch,
                       absl::Duration producer_timeout)
    : data_(std::move(data)),
      cursors_(std::move(cursors)),
      reader_index_(reader_index),
      lease_epoch_(lease_epoch),
      producer_timeout_(producer_timeout) {}

RingReader::~RingReader() = default;

absl::StatusOr<std::unique_ptr<RingReader>> RingReader::Open(
    RingFds fds, const std::string& shm_name, uint32_t reader_index, uint32_t lease_epoch,
    uint64_t expected_generation, absl::Duration producer_timeout) {
  // The batch area is mapped read-only: nothing this process does can corrupt a batch
  // its peers read, and the fd we got cannot be mapped writable anyway.
  absl::StatusOr<std::unique_ptr<Segment>> segment =
      Segment::Map(std::move(fds.data), shm_name, Access::kReadOnly);
  if (!segment.ok()) return segment.status();
  absl::StatusOr<std::unique_ptr<Segment>> cursors =
      Segment::Map(std::move(fds.cursors), shm_name + ".cursors", Access::kReadWrite);
  if (!cursors.ok()) return cursors.status();
  if ((*segment)->size() < sizeof(RingHeader)) {
    return Corrupt(shm_name, absl::StrCat("segment is only ", (*segment)->size(), " bytes"));
  }
  if ((*cursors)->size() < sizeof(CursorHeader)) {
    return Corrupt(shm_name, absl::StrCat("cursor segment is only ", (*cursors)->size(),
                                          " bytes"));
  }
  const auto& h = *reinterpret_cast<const RingHeader*>((*segment)->data());
  if (absl::Status s = ValidateHeader(shm_name, h, (*segment)->size(), (*cursors)->size(),
                                      expected_generation);
      !s.ok()) {
    return s;
  }
  const auto& c = *reinterpret_cast<const CursorHeader*>((*cursors)->data());
  if (absl::Status s = ValidateCursorHeader(shm_name, c, h); !s.ok()) return s;
  std::unique_ptr<RingReader> reader(new RingReader(
      *std::move(segment), *std::move(cursors), reader_index, lease_epoch, producer_timeout));
  // Snapshot the validated geometry; later reads never consult the header's copy.
  reader->generation_ = h.generation;
  reader->slot_count_ = h.slot_count;
  reader->slot_stride_ = h.slot_stride;
  reader->slot_end_ = kTensorTableBytes + h.slot_payload_bytes;
  reader->reader_table_offset_ = h.reader_table_offset;
  reader->descriptor_offset_ = h.descriptor_offset;
  reader->payload_offset_ = h.payload_offset;
  if (absl::Status s = reader->StateStatus(); !s.ok()) return s;
  if (h.state.load(std::memory_order_acquire) != static_cast<uint32_t>(RingState::kReady)) {
    return absl::CancelledError(absl::StrCat("ring ", shm_name, " is closed"));
  }
  if (reader_index >= h.reader_capacity) {
    return absl::FailedPreconditionError(absl::StrCat(
        "reader index ", reader_index, " out of range (ring has ", h.reader_capacity, ")"));
  }
  if (absl::Status s = reader->LeaseStatus(); !s.ok()) return s;
  reader->consumed_ = reader->record()->consumed.load(std::memory_order_acquire);
  reader->next_seq_ = reader->consumed_;
  return reader;
}

const RingHeader* RingReader::header() const {
  return reinterpret_cast<const RingHeader*>(data_->data());
}

ReaderRecord* RingReader::record() const {
  return reinterpret_cast<ReaderRecord*>(cursors_->data() + reader_table_offset_ +
                                         uint64_t{reader_index_} * kReaderRecordBytes);
}

absl::Status RingReader::StateStatus() const {
  const RingHeader* h = header();
  const uint32_t state = h->state.load(std::memory_order_acquire);
  switch (static_cast<RingState>(state)) {
    case RingState::kReady:
    case RingState::kClosed:  // the caller drains published data first
      return absl::OkStatus();
    case RingState::kPoisoned: {
      // poison_detail (minor >= 1) holds the whole reason, poison_reason its head.
      const std::string reason =
          h->minor >= 1 ? std::string(h->poison_detail, strnlen(h->poison_detail, kPoisonDetailBytes))
                        : std::string(h->poison_reason, strnlen(h->poison_reason, kPoisonReasonBytes));
      // A negative rank means the producer itself gave up (e.g. a pipeline error).
      if (h->poison_rank < 0) {
        return absl::InternalError(absl::StrCat("ring ", name(),
                                               " poisoned by zephond: ", reason,
                                               " (generation ", generation_, ")"));
      }
      return absl::AbortedError(absl::StrCat("ring ", name(), " poisoned: rank ",
                                             h->poison_rank, " lost: ", reason,
                                             " (generation ", generation_, ")"));
    }
    case RingState::kInitializing:
      return absl::UnavailableError(absl::StrCat("ring ", name(), " is not ready"));
  }
  return absl::FailedPreconditionError(
      absl::StrCat("ring ", name(), " has unknown state ", state));
}

absl::Status RingReader::LeaseStatus() const {
  const ReaderRecord* r = record();
  const uint32_t state = r->state.load(std::memory_order_acquire);
  const uint32_t epoch = r->lease_epoch.load(std::memory_order_acquire);
  if (state != static_cast<uint32_t>(ReaderState::kAttached) || epoch != lease_epoch_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "ring ", name(), ": lease ", reader_index_, "/epoch ", lease_epoch_,
        " is not attached (record state ", state, ", epoch ", epoch, "); attach again"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SlotView> RingReader::Acquire(absl::Duration timeout) {
  if (end_of_stream_) return absl::OutOfRangeError("end of data");
  const absl::Time deadline = absl::Now() + timeout;
  const RingHeader* h = header();
  ReaderRecord* r = record();
  for (int spins = 0;; ++spins) {
    // Poison wins over data: a TP group must not run on without a peer.
    if (absl::Status s = StateStatus(); !s.ok()) return s;
    // A closed ring has no producer left to overwrite slots, so what was published can be
    // drained even after zephond ended the lease while shutting down.
    const bool closed =
        h->state.load(std::memory_order_acquire) == static_cast<uint32_t>(RingState::kClosed);
    if (!closed) {
      if (absl::Status s = LeaseStatus(); !s.ok()) return s;
    }
    if (h->published.load(std::memory_order_acquire) > next_seq_) break;
    if (closed) {
      return absl::CancelledError(absl::StrCat("ring ", name(),
                                               " was closed by zephond after seq ", next_seq_));
    }
    if (spins < kSpinIterations) {
      CpuRelax();
      continue;
    }
    const uint64_t now_ns = MonotonicNowNs();
    const uint64_t beat_ns = h->producer_heartbeat_ns.load(std::memory_order_relaxed);
    if (now_ns > beat_ns && absl::Nanoseconds(now_ns - beat_ns) > producer_timeout_) {
      return absl::UnavailableError(absl::StrCat(
          "zephond stopped responding: ring ", name(), " producer heartbeat is ",
          absl::FormatDuration(absl::Nanoseconds(now_ns - beat_ns)), " old (timeout ",
          absl::FormatDuration(producer_timeout_), ")"));
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) {
      return absl::DeadlineExceededError(absl::StrCat(
          "ring ", name(), ": seq ", next_seq_, " not published within ",
          absl::FormatDuration(timeout)));
    }
    r->heartbeat_ns.store(now_ns, std::memory_order_relaxed);
    // Dekker handshake with Publish(): flag, snapshot the word, re-check, then sleep on
    // the snapshot. A publish after our re-check sees the flag and wakes us.
    r->waiting.store(1, std::memory_order_seq_cst);
    const uint32_t word = h->publish_wake.load(std::memory_order_seq_cst);
    if (h->published.load(std::memory_order_seq_cst) <= next_seq_ &&
        h->state.load(std::memory_order_seq_cst) == static_cast<uint32_t>(RingState::kReady)) {
      FutexWait(const_cast<std::atomic<uint32_t>*>(&h->publish_wake), word,
                std::min(left, kMaxSleep));
    }
    r->waiting.store(0, std::memory_order_relaxed);
  }

  const uint64_t seq = next_seq_;
  absl::StatusOr<SlotView> view = ReadSlot(seq);
  if (!view.ok()) return view.status();
  ++next_seq_;
  if (view->flags & kSlotEndOfStream) {
    end_of_stream_ = true;
    Release(seq).IgnoreError();  // nobody else can release it: the caller never sees it
    return absl::OutOfRangeError(absl::StrCat("end of data (ring ", name(),
                                              ", seq ", seq, ")"));
  }
  return view;
}

absl::StatusOr<SlotView> RingReader::ReadSlot(uint64_t seq) const {
  const uint64_t index = seq & (slot_count_ - 1);
  const auto* d = reinterpret_cast<const SlotDescriptor*>(
      data_->data() + descriptor_offset_ + index * kDescriptorBytes);
  const uint8_t* slot = data_->data() + payload_offset_ + index * slot_stride_;
  auto data_loss = [&](const std::string& what) {
    return absl::DataLossError(
        absl::StrCat("ring ", name(), " seq ", seq, ": ", what));
  };
  // Acquire: pairs with the producer's release store; the fields below are complete.
  const uint64_t found = d->seq.load(std::memory_order_acquire);
  if (found != seq) return data_loss(absl::StrCat("descriptor holds seq ", found));
  SlotView view;
  view.seq = seq;
  view.flags = d->flags;
  view.lane = d->lane;
  view.lane_batch_index = d->lane_batch_index;
  const uint32_t count = d->tensor_count;
  const uint64_t table = d->table_offset;
  if (count > kMaxTensorsPerSlot || !FitsIn(table, count, kTensorEntryBytes, slot_end_)) {
    return data_loss(absl::StrCat("tensor table (offset ", table, ", ", count,
                                  " entries) is outside the slot (", slot_end_, " bytes)"));
  }
  const uint64_t table_end = table + uint64_t{count} * kTensorEntryBytes;
  for (uint32_t i = 0; i < count; ++i) {
    TensorEntry e;  // copy first: validate exactly what we use
    std::memcpy(&e, slot + table + uint64_t{i} * kTensorEntryBytes, sizeof(e));
    const auto dtype = static_cast<DType>(e.dtype);
    uint64_t bytes = DTypeSize(dtype);
    if (bytes == 0 || e.ndim > kMaxTensorRank) {
      return data_loss(absl::StrCat("tensor ", i, " has dtype ", e.dtype, ", rank ", e.ndim));
    }
    for (uint32_t k = 0; k < e.ndim; ++k) {
      if (__builtin_mul_overflow(bytes, e.shape[k], &bytes)) {
        return data_loss(absl::StrCat("tensor ", i, " shape overflows"));
      }
    }
    if (e.data_offset % kTensorAlignment != 0 || e.data_offset < table_end ||
        !FitsIn(e.data_offset, bytes, 1, slot_end_)) {
      return data_loss(absl::StrCat("tensor ", i, " data (offset ", e.data_offset, ", ",
                                    bytes, " bytes) is outside the slot"));
    }
    view.tensors.push_back(TensorView{std::string(e.name, strnlen(e.name, kTensorNameBytes)),
                                      dtype, std::vector<uint64_t>(e.shape, e.shape + e.ndim),
                                      slot + e.data_offset, bytes});
  }
  return view;
}

absl::Status RingReader::Release(uint64_t seq) {
  if (seq < consumed_ || seq >= next_seq_ || released_ahead_.count(seq) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "Release(", seq, "): not loaned (loaned range [", consumed_, ", ", next_seq_, "))"));
  }
  if (seq != consumed_) {
    released_ahead_.insert(seq);
    return absl::OkStatus();
  }
  ++consumed_;
  while (!released_ahead_.empty() && *released_ahead_.begin() == consumed_) {
    released_ahead_.erase(released_ahead_.begin());
    ++consumed_;
  }
  // A revoked lease's record may belong to someone else now: never write it.
  if (absl::Status s = LeaseStatus(); !s.ok()) return s;
  const RingHeader* h = header();
  auto* wake = &reinterpret_cast<CursorHeader*>(cursors_->data())->release_wake;
  // seq_cst: the Dekker pair with the producer's (release_waiting = 1; read word; check
  // cursors). Release semantics also order our slot reads before the producer's reuse.
  record()->consumed.store(consumed_, std::memory_order_seq_cst);
  if (h->release_waiting.load(std::memory_order_seq_cst) != 0) {
    wake->fetch_add(1, std::memory_order_seq_cst);
    FutexWakeAll(wake);
  }
  return absl::OkStatus();
}

}  // namespace zephon::shm
