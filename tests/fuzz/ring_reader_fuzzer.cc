// Fuzz target: the ring reader's validation of everything in a ring's two segments
// (shm/ring_reader.cc: data header, cursor header, reader record, slot descriptors, tensor
// tables). Readers trust nothing: the data segment comes from zephond, but the cursor
// segment is writable by every reader of the ring, and a reader must not crash on either.
//
// Input (ring layout 2):
//   [u64 expected generation][u32 reader index][u32 lease epoch][u32 data_bytes]
//   [data segment: data_bytes bytes][cursor segment: the rest]
// (a data_bytes beyond the input is clamped: the cursor segment is then empty). Each
// segment is written to a fresh memfd of exactly that size and sealed as RingWriter seals
// it (F_SEAL_SHRINK | F_SEAL_GROW, then F_SEAL_FUTURE_WRITE for the data segment, then
// F_SEAL_SEAL); the data memfd is reopened O_RDONLY through /proc/self/fd, as zephond
// hands it over, and both go to RingReader::Open. Up to 16 slots are then acquired (zero
// timeout) and released. Invariants beyond "no crash, no UB" (a pointer outside the
// mapping would fault):
//   * every error is a Status with a message, never a signal;
//   * every TensorView lies inside its own slot's bytes of the data mapping
//     [payload_offset + index * slot_stride, + slot_stride), its byte count is
//     dtype size x product of its shape, and all of its bytes are readable;
//   * a slot has at most kMaxTensorsPerSlot tensors, with names of at most 24 bytes.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "shm/ring_layout.h"
#include "shm/ring_reader.h"
#include "shm/segment.h"
#include "shm/unique_fd.h"
#include "tests/fuzz/fuzz_check.h"

#ifndef F_SEAL_FUTURE_WRITE
#define F_SEAL_FUTURE_WRITE 0x0010  // Linux 5.1; older glibc headers lack the name
#endif

namespace {

using zephon::shm::RingFds;
using zephon::shm::RingHeader;
using zephon::shm::RingReader;
using zephon::shm::SlotView;
using zephon::shm::TensorView;
using zephon::shm::UniqueFd;

constexpr size_t kPrefixBytes = 20;
constexpr int kMaxAcquires = 16;

// A memfd holding `bytes`, sealed like Segment::Create + Segment::Seal(forbid_new_writers).
// An invalid fd if the host refuses (then the input is skipped: not the reader's fault).
UniqueFd SealedMemfd(const char* name, const uint8_t* bytes, size_t size,
                     bool forbid_new_writers) {
  UniqueFd fd(::memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd.valid() || ::fchmod(fd.get(), 0600) != 0 ||
      ::ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
    return UniqueFd();
  }
  for (size_t done = 0; done < size;) {
    const ssize_t n = ::pwrite(fd.get(), bytes + done, size - done, static_cast<off_t>(done));
    if (n <= 0) return UniqueFd();
    done += static_cast<size_t>(n);
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) != 0) return UniqueFd();
  if (forbid_new_writers && ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_FUTURE_WRITE) != 0) {
    return UniqueFd();
  }
  if (::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SEAL) != 0) return UniqueFd();
  return fd;
}

// The fds a reader gets from zephond (RingWriter::ReaderFds): the data segment reopened
// O_RDONLY, the cursor segment read-write. False if the host refuses.
bool MakeRingFds(const uint8_t* data, size_t data_size, const uint8_t* cursors,
                 size_t cursor_size, RingFds* fds) {
  UniqueFd writable = SealedMemfd("zephon-fuzz-ring", data, data_size, true);
  fds->cursors = SealedMemfd("zephon-fuzz-ring.cursors", cursors, cursor_size, false);
  if (!writable.valid() || !fds->cursors.valid()) return false;
  const std::string path = absl::StrCat("/proc/self/fd/", writable.get());
  fds->data = UniqueFd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  return fds->data.valid();
}

void CheckSlot(const RingReader& reader, const SlotView& view) {
  const auto& h = *reinterpret_cast<const RingHeader*>(reader.mapping());
  const uint64_t index = view.seq & (reader.slot_count() - 1);
  const uint8_t* slot_begin = reader.mapping() + h.payload_offset + index * h.slot_stride;
  const uint8_t* slot_end = slot_begin + h.slot_stride;
  FUZZ_CHECK(view.tensors.size() <= zephon::shm::kMaxTensorsPerSlot,
             absl::StrCat(view.tensors.size(), " tensors"));
  for (const TensorView& t : view.tensors) {
    FUZZ_CHECK(t.name.size() <= zephon::shm::kTensorNameBytes, t.name);
    uint64_t bytes = zephon::shm::DTypeSize(t.dtype);
    for (uint64_t dim : t.shape) bytes *= dim;
    FUZZ_CHECK(bytes == t.bytes, absl::StrCat(t.name, ": ", t.bytes, " bytes, shape says ", bytes));
    const auto* data = static_cast<const uint8_t*>(t.data);
    FUZZ_CHECK(data >= slot_begin && data <= slot_end &&
                   t.bytes <= static_cast<uint64_t>(slot_end - data),
               absl::StrCat(t.name, ": data outside slot ", index));
    volatile uint8_t sink = 0;
    for (uint64_t i = 0; i < t.bytes; ++i) sink ^= data[i];
    (void)sink;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < kPrefixBytes) return 0;
  uint64_t generation;
  uint32_t reader_index, lease_epoch, data_bytes;
  std::memcpy(&generation, data, 8);
  std::memcpy(&reader_index, data + 8, 4);
  std::memcpy(&lease_epoch, data + 12, 4);
  std::memcpy(&data_bytes, data + 16, 4);
  const size_t rest = size - kPrefixBytes;
  const size_t data_size = data_bytes < rest ? data_bytes : rest;
  const uint8_t* segment = data + kPrefixBytes;
  RingFds fds;
  if (!MakeRingFds(segment, data_size, segment + data_size, rest - data_size, &fds)) return 0;
  absl::StatusOr<std::unique_ptr<RingReader>> reader = RingReader::Open(
      std::move(fds), "zephon-fuzz-ring", reader_index, lease_epoch, generation, absl::Hours(1));
  if (!reader.ok()) {
    FUZZ_CHECK(!reader.status().message().empty(), "empty error message");
    return 0;
  }
  for (int i = 0; i < kMaxAcquires; ++i) {
    absl::StatusOr<SlotView> view = (*reader)->Acquire(absl::ZeroDuration());
    if (!view.ok()) {
      FUZZ_CHECK(!view.status().message().empty(), "empty error message");
      break;
    }
    CheckSlot(**reader, *view);
    const absl::Status released = (*reader)->Release(view->seq);
    FUZZ_CHECK(released.ok() || released.code() == absl::StatusCode::kFailedPrecondition,
               released.ToString());
  }
  return 0;
}
