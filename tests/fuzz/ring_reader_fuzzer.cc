// Fuzz target: the ring reader's validation of everything in a ring segment
// (shm/ring_reader.cc: header, reader record, slot descriptors, tensor tables), which
// any process with write access to the segment can corrupt.
//
// Input: [u64 expected generation][u32 reader index][u32 lease epoch][segment bytes].
// The segment bytes are written to a fresh POSIX shm object of exactly that size, which
// RingReader::Open maps; up to 16 slots are then acquired (zero timeout) and released.
// Invariants beyond "no crash, no UB" (a pointer outside the mapping would fault):
//   * every error is a Status, never a signal;
//   * every TensorView lies inside its own slot's bytes of the mapping
//     [payload_offset + index * slot_stride, + slot_stride), its byte count is
//     dtype size x product of its shape, and all of its bytes are readable;
//   * a slot has at most kMaxTensorsPerSlot tensors, with names of at most 24 bytes.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "shm/ring_layout.h"
#include "shm/ring_reader.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using zephon::shm::RingHeader;
using zephon::shm::RingReader;
using zephon::shm::SlotView;
using zephon::shm::TensorView;

constexpr size_t kPrefixBytes = 16;
constexpr int kMaxAcquires = 16;

// Writes `bytes` to a new shm object `name`; false if the host refuses (no /dev/shm).
bool WriteSegment(const std::string& name, const uint8_t* bytes, size_t size) {
  ::shm_unlink(name.c_str());
  const int fd = ::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  bool ok = ::ftruncate(fd, static_cast<off_t>(size)) == 0;
  for (size_t done = 0; ok && done < size;) {
    const ssize_t n = ::pwrite(fd, bytes + done, size - done, static_cast<off_t>(done));
    if (n <= 0) ok = false;
    done += n > 0 ? static_cast<size_t>(n) : 0;
  }
  ::close(fd);
  return ok;
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
  uint32_t reader_index, lease_epoch;
  std::memcpy(&generation, data, 8);
  std::memcpy(&reader_index, data + 8, 4);
  std::memcpy(&lease_epoch, data + 12, 4);
  static const std::string name = absl::StrCat("/zephon-fuzz-ring.", ::getpid());
  if (!WriteSegment(name, data + kPrefixBytes, size - kPrefixBytes)) return 0;
  absl::StatusOr<std::unique_ptr<RingReader>> reader =
      RingReader::Open(name, reader_index, lease_epoch, generation, absl::Hours(1));
  ::shm_unlink(name.c_str());  // the mapping outlives the name
  if (!reader.ok()) {
    FUZZ_CHECK(!reader.status().message().empty(), "empty error message");
    return 0;
  }
  for (int i = 0; i < kMaxAcquires; ++i) {
    absl::StatusOr<SlotView> view = (*reader)->Acquire(absl::ZeroDuration());
    if (!view.ok()) break;
    CheckSlot(**reader, *view);
    const absl::Status released = (*reader)->Release(view->seq);
    FUZZ_CHECK(released.ok() || released.code() == absl::StatusCode::kFailedPrecondition,
               released.ToString());
  }
  return 0;
}
