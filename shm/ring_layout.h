// File: shm/ring_layout.h
//
// The shared-memory ring ABI, layout major version 2. A ring is two sealed memfds
// (shm/segment.h) mapped by several processes at different addresses:
//   * the data segment [header page][slot descriptors][payload slots...], written by the
//     producer (zephond) only and mapped READ-ONLY by readers;
//   * the cursor segment [cursor header page][reader table], the only memory a reader
//     writes (its own record and the release futex word).
// A reader can therefore corrupt at most cursors and wake words, never a batch or the
// geometry, and neither segment can be resized by anyone. Rules for every struct:
//   * fields are fixed-width with explicit padding; no pointers, no virtuals;
//   * magic and major/minor sit at offsets that never move across major versions;
//   * every shared word has exactly one writing process (the exceptions are the two futex
//     wake words, which carry no data: any value is valid, only change matters);
//   * atomics are always lock-free (so address-free) and have the representation of the
//     plain integer they wrap;
//   * every size and offset below is pinned by a static_assert. Changing any field's size,
//     order or meaning bumps kLayoutMajor; minor versions only append fields inside
//     header_bytes. The prose spec is shm/RING_FORMAT.md.
//
// Structs holding std::atomic are standard-layout and trivially destructible but, in
// C++17, not trivially copyable (std::atomic deletes its copy operations). They are never
// copied: the writer placement-constructs them once, everyone else uses them in place.
// TensorEntry, which holds no atomics, is trivially copyable, and readers copy it out
// before validating it.
#ifndef ZEPHON_SHM_RING_LAYOUT_H_
#define ZEPHON_SHM_RING_LAYOUT_H_

#include <time.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace zephon::shm {

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "The Zephon ring ABI is defined for little-endian hosts only"
#endif

// The bytes "ZEPHRING" as they appear at offset 0 on a little-endian host.
inline constexpr uint64_t kRingMagic = 0x474E49524850455AULL;
// Major 2 (issue 12): readers' writable words moved to their own segment (the cursor
// segment); both segments are sealed memfds handed over with SCM_RIGHTS.
inline constexpr uint16_t kLayoutMajor = 2;
// Minor 1 (in major 1) appended poison_detail; major 2 starts at minor 1 so the rule
// "minor >= 1 has poison_detail" stays true.
inline constexpr uint16_t kLayoutMinor = 1;
// The bytes "ZEPHCURS": the cursor segment's magic.
inline constexpr uint64_t kCursorMagic = 0x535255434850455AULL;

inline constexpr uint64_t kPageBytes = 4096;
inline constexpr uint32_t kHeaderBytes = 4096;
inline constexpr uint32_t kCursorHeaderBytes = 4096;
inline constexpr uint32_t kReaderRecordBytes = 128;
inline constexpr uint32_t kDescriptorBytes = 64;
inline constexpr uint32_t kTensorEntryBytes = 64;
inline constexpr uint32_t kMaxTensorsPerSlot = 8;
inline constexpr uint32_t kTensorTableBytes = kMaxTensorsPerSlot * kTensorEntryBytes;
inline constexpr uint32_t kTensorAlignment = 64;
inline constexpr uint32_t kMaxTensorRank = 4;
inline constexpr size_t kTensorNameBytes = 24;
inline constexpr size_t kPoisonReasonBytes = 256;
inline constexpr size_t kPoisonDetailBytes = 1024;
inline constexpr size_t kLabelBytes = 128;

// Geometry limits. Tensor data offsets are u32, so a slot must fit in 4 GiB.
inline constexpr uint32_t kMaxSlotCount = 1u << 16;
inline constexpr uint32_t kMaxReaderCapacity = 1024;
inline constexpr uint64_t kMaxSlotStride = 1ull << 32;

// Descriptor seq value before a slot is first written: never a valid sequence.
inline constexpr uint64_t kNoSeq = ~0ull;

enum class RingState : uint32_t {
  kInitializing = 0,  // zero-filled segment: nothing may be trusted yet
  kReady = 1,         // header complete; stored last, with release
  kClosed = 2,        // orderly end; readers drain what was published, then CANCELLED
  kPoisoned = 3,      // a peer died; readers get ABORTED at once
};

enum class ReaderState : uint32_t {
  kFree = 0,      // never used
  kReserved = 1,  // declared peer, not attached yet; gates the producer
  kAttached = 2,  // live lease; gates the producer
  kDetached = 3,  // left cleanly; reusable, does not gate
  kDead = 4,      // lost; the ring is poisoned
};

// Lower-case name of a reader state, for status output and logs.
constexpr std::string_view ReaderStateName(ReaderState state) {
  switch (state) {
    case ReaderState::kFree: return "free";
    case ReaderState::kReserved: return "reserved";
    case ReaderState::kAttached: return "attached";
    case ReaderState::kDetached: return "detached";
    case ReaderState::kDead: return "dead";
  }
  return "invalid";
}

enum SlotFlags : uint32_t {
  kSlotEndOfStream = 1,
  kSlotError = 2,
};

enum class DType : uint8_t {
  kUInt8 = 1, kInt8, kUInt16, kInt16, kUInt32, kInt32, kUInt64, kInt64, kFloat32, kFloat64,
};

// Bytes per element, or 0 for a value outside the enum (e.g. read from a corrupt slot).
constexpr size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kUInt8: case DType::kInt8: return 1;
    case DType::kUInt16: case DType::kInt16: return 2;
    case DType::kUInt32: case DType::kInt32: case DType::kFloat32: return 4;
    case DType::kUInt64: case DType::kInt64: case DType::kFloat64: return 8;
  }
  return 0;
}

// numpy-style name ("uint8", "float32", ...), or "invalid".
constexpr std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kUInt8: return "uint8";
    case DType::kInt8: return "int8";
    case DType::kUInt16: return "uint16";
    case DType::kInt16: return "int16";
    case DType::kUInt32: return "uint32";
    case DType::kInt32: return "int32";
    case DType::kUInt64: return "uint64";
    case DType::kInt64: return "int64";
    case DType::kFloat32: return "float32";
    case DType::kFloat64: return "float64";
  }
  return "invalid";
}

// One 4 KiB page at offset 0 of the data segment. Every field is written by the producer
// (zephond) only; readers map it read-only.
struct RingHeader {
  // Identity: offsets 0..31 never move.
  uint64_t magic;
  uint16_t major;
  uint16_t minor;
  uint32_t header_bytes;
  uint64_t total_bytes;
  uint64_t generation;  // random, nonzero; fences readers off stale segments
  // Geometry.
  uint32_t slot_count;  // power of two; slot index = seq & (slot_count - 1)
  uint32_t reader_capacity;
  uint64_t slot_stride;         // page multiple
  uint64_t slot_payload_bytes;  // tensor data capacity after the tensor table
  uint64_t reader_table_offset;  // inside the CURSOR segment
  uint64_t descriptor_offset;
  uint64_t payload_offset;
  // Lifecycle. poison_rank/poison_reason are written before state = kPoisoned (release).
  std::atomic<uint32_t> state;  // RingState
  int32_t poison_rank;
  int64_t producer_pid;
  std::atomic<uint64_t> producer_heartbeat_ns;  // CLOCK_MONOTONIC
  uint64_t cursor_bytes;  // size of the cursor segment
  uint8_t reserved0[16];
  char poison_reason[kPoisonReasonBytes];  // NUL-terminated
  char label[kLabelBytes];                 // instance id for humans, NUL-terminated
  // Hot words, each on its own 128-byte line against false sharing.
  alignas(128) std::atomic<uint64_t> published;  // one past the last published seq
  uint8_t reserved1[120];
  alignas(128) std::atomic<uint32_t> publish_wake;  // futex word, bumped per publish
  uint32_t reserved2;  // waiters are the per-reader `waiting` flags (one writer each)
  uint8_t reserved3[120];
  alignas(128) uint32_t reserved_wake;     // layout 1's release_wake; now in CursorHeader
  std::atomic<uint32_t> release_waiting;  // producer sleeps on CursorHeader::release_wake
  uint8_t reserved4[120];
  // Minor 1: the full poison reason, NUL-terminated (errors naming an object-store URL,
  // an HTTP status and a sample outgrow poison_reason). Written with poison_reason.
  char poison_detail[kPoisonDetailBytes];
  uint8_t reserved_tail[kHeaderBytes - 896 - kPoisonDetailBytes];
};

// One 4 KiB page at offset 0 of the cursor segment. Identity fields are written by the
// producer before the segment is handed out and are re-validated by every reader against
// the data header; the producer itself never reads them back (any process holding the
// cursor segment may overwrite them). release_wake is bumped by readers.
struct CursorHeader {
  uint64_t magic;  // kCursorMagic
  uint16_t major;
  uint16_t minor;
  uint32_t reader_capacity;
  uint64_t generation;   // equals the data header's
  uint64_t total_bytes;  // cursor segment size
  uint8_t reserved0[96];
  alignas(128) std::atomic<uint32_t> release_wake;  // futex word, bumped by readers
  uint8_t reserved_tail[kCursorHeaderBytes - 132];
};

// One per declared reader, kReaderRecordBytes apart, in the cursor segment. state/rank/lease_epoch/pid are
// written by the producer process; waiting/heartbeat_ns by the reader. consumed is seeded
// by the producer before the lease is handed out and written only by the reader after.
struct ReaderRecord {
  std::atomic<uint32_t> state;  // ReaderState
  int32_t rank;
  std::atomic<uint32_t> lease_epoch;  // bumped on every attach
  std::atomic<uint32_t> waiting;      // reader is (about to be) asleep on publish_wake
  int64_t pid;
  std::atomic<uint64_t> consumed;  // every seq below this is released
  std::atomic<uint64_t> heartbeat_ns;
  uint8_t reserved[88];
};

// One per slot. All fields are written while the producer holds the slot's loan; seq is
// stored last, with release, and readers check it equals the seq they expect.
struct SlotDescriptor {
  std::atomic<uint64_t> seq;
  uint64_t payload_bytes;  // bytes used in the slot, tensor table included
  uint64_t lane_batch_index;
  uint32_t flags;  // SlotFlags
  uint32_t tensor_count;
  uint32_t lane;
  uint32_t table_offset;  // tensor table, relative to the slot start (0 in v1)
  uint64_t reserved[3];
};

// The per-slot tensor table entry (kMaxTensorsPerSlot of them at table_offset).
struct TensorEntry {
  char name[kTensorNameBytes];  // NUL-padded; may use all 24 bytes
  uint8_t dtype;                // DType
  uint8_t ndim;                 // <= kMaxTensorRank
  uint16_t reserved;
  uint32_t data_offset;  // relative to the slot start, kTensorAlignment-aligned
  uint64_t shape[kMaxTensorRank];  // unused dims are 0
};

// Section offsets and sizes for a geometry; the one place that computes them.
struct RingSections {
  uint64_t reader_table_offset;  // in the cursor segment
  uint64_t cursor_bytes;         // cursor segment size
  uint64_t descriptor_offset;    // in the data segment, and the rest too
  uint64_t payload_offset;
  uint64_t slot_stride;
  uint64_t total_bytes;  // data segment size
};

constexpr uint64_t RoundUp(uint64_t value, uint64_t multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

// REQUIRES: arguments within the k*Max limits above (so nothing overflows).
constexpr RingSections ComputeSections(uint32_t slot_count, uint32_t reader_capacity,
                                       uint64_t slot_payload_bytes) {
  RingSections s{};
  s.reader_table_offset = kCursorHeaderBytes;
  s.cursor_bytes = RoundUp(
      s.reader_table_offset + uint64_t{reader_capacity} * kReaderRecordBytes, kPageBytes);
  s.descriptor_offset = kHeaderBytes;
  s.payload_offset =
      RoundUp(s.descriptor_offset + uint64_t{slot_count} * kDescriptorBytes, kPageBytes);
  s.slot_stride = RoundUp(kTensorTableBytes + slot_payload_bytes, kPageBytes);
  s.total_bytes = s.payload_offset + uint64_t{slot_count} * s.slot_stride;
  return s;
}

// The heartbeat clock of the ABI: CLOCK_MONOTONIC in nanoseconds.
inline uint64_t MonotonicNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// ---- ABI pins -------------------------------------------------------------------------
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == 4 && alignof(std::atomic<uint32_t>) == 4);
static_assert(sizeof(std::atomic<uint64_t>) == 8 && alignof(std::atomic<uint64_t>) == 8);

static_assert(std::is_standard_layout_v<RingHeader>);
static_assert(std::is_trivially_destructible_v<RingHeader>);
static_assert(sizeof(RingHeader) == kHeaderBytes);
static_assert(offsetof(RingHeader, magic) == 0);
static_assert(offsetof(RingHeader, major) == 8);
static_assert(offsetof(RingHeader, minor) == 10);
static_assert(offsetof(RingHeader, header_bytes) == 12);
static_assert(offsetof(RingHeader, total_bytes) == 16);
static_assert(offsetof(RingHeader, generation) == 24);
static_assert(offsetof(RingHeader, slot_count) == 32);
static_assert(offsetof(RingHeader, reader_capacity) == 36);
static_assert(offsetof(RingHeader, slot_stride) == 40);
static_assert(offsetof(RingHeader, slot_payload_bytes) == 48);
static_assert(offsetof(RingHeader, reader_table_offset) == 56);
static_assert(offsetof(RingHeader, descriptor_offset) == 64);
static_assert(offsetof(RingHeader, payload_offset) == 72);
static_assert(offsetof(RingHeader, state) == 80);
static_assert(offsetof(RingHeader, poison_rank) == 84);
static_assert(offsetof(RingHeader, producer_pid) == 88);
static_assert(offsetof(RingHeader, producer_heartbeat_ns) == 96);
static_assert(offsetof(RingHeader, poison_reason) == 128);
static_assert(offsetof(RingHeader, label) == 384);
static_assert(offsetof(RingHeader, published) == 512);
static_assert(offsetof(RingHeader, publish_wake) == 640);
static_assert(offsetof(RingHeader, cursor_bytes) == 104);
static_assert(offsetof(RingHeader, reserved_wake) == 768);
static_assert(offsetof(RingHeader, release_waiting) == 772);
static_assert(offsetof(RingHeader, poison_detail) == 896);

static_assert(std::is_standard_layout_v<CursorHeader>);
static_assert(std::is_trivially_destructible_v<CursorHeader>);
static_assert(sizeof(CursorHeader) == kCursorHeaderBytes);
static_assert(offsetof(CursorHeader, magic) == 0);
static_assert(offsetof(CursorHeader, major) == 8);
static_assert(offsetof(CursorHeader, minor) == 10);
static_assert(offsetof(CursorHeader, reader_capacity) == 12);
static_assert(offsetof(CursorHeader, generation) == 16);
static_assert(offsetof(CursorHeader, total_bytes) == 24);
static_assert(offsetof(CursorHeader, release_wake) == 128);

static_assert(std::is_standard_layout_v<ReaderRecord>);
static_assert(std::is_trivially_destructible_v<ReaderRecord>);
static_assert(sizeof(ReaderRecord) == kReaderRecordBytes);
static_assert(offsetof(ReaderRecord, state) == 0);
static_assert(offsetof(ReaderRecord, rank) == 4);
static_assert(offsetof(ReaderRecord, lease_epoch) == 8);
static_assert(offsetof(ReaderRecord, waiting) == 12);
static_assert(offsetof(ReaderRecord, pid) == 16);
static_assert(offsetof(ReaderRecord, consumed) == 24);
static_assert(offsetof(ReaderRecord, heartbeat_ns) == 32);

static_assert(std::is_standard_layout_v<SlotDescriptor>);
static_assert(std::is_trivially_destructible_v<SlotDescriptor>);
static_assert(sizeof(SlotDescriptor) == kDescriptorBytes);
static_assert(offsetof(SlotDescriptor, seq) == 0);
static_assert(offsetof(SlotDescriptor, payload_bytes) == 8);
static_assert(offsetof(SlotDescriptor, lane_batch_index) == 16);
static_assert(offsetof(SlotDescriptor, flags) == 24);
static_assert(offsetof(SlotDescriptor, tensor_count) == 28);
static_assert(offsetof(SlotDescriptor, lane) == 32);
static_assert(offsetof(SlotDescriptor, table_offset) == 36);

static_assert(std::is_standard_layout_v<TensorEntry>);
static_assert(std::is_trivially_copyable_v<TensorEntry>);
static_assert(sizeof(TensorEntry) == kTensorEntryBytes);
static_assert(offsetof(TensorEntry, name) == 0);
static_assert(offsetof(TensorEntry, dtype) == 24);
static_assert(offsetof(TensorEntry, ndim) == 25);
static_assert(offsetof(TensorEntry, data_offset) == 28);
static_assert(offsetof(TensorEntry, shape) == 32);
static_assert(kTensorTableBytes % kTensorAlignment == 0);
static_assert(kHeaderBytes % kPageBytes == 0);

}  // namespace zephon::shm

#endif  // ZEPHON_SHM_RING_LAYOUT_H_
