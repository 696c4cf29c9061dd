// File: shm/segment.h
//
// Segment: RAII owner of one sealed memfd (memfd_create) and its mapping. Rings live in
// memfds, not in /dev/shm names: nothing is left behind when zephond dies (the kernel
// frees the memory when the last fd and mapping go), the size of /dev/shm does not
// limit them, and access is granted by handing a reader its fds (shm/fd_passing.h)
// instead of by file permissions.
//
// Why seals: a process holding a ring fd could otherwise ftruncate it, and every process
// mapping the ring (zephond first) would die of SIGBUS on its next touch. Create() seals
// the size (F_SEAL_SHRINK | F_SEAL_GROW) before anything is mapped; Map() refuses an fd
// without F_SEAL_SHRINK for the same reason. Seal() then forbids new writable mappings
// of a read-only section (F_SEAL_FUTURE_WRITE) and locks the seal set (F_SEAL_SEAL).
//
// Thread safety: a Segment is immutable after construction except Seal(), which the
// creator calls once before sharing it; the const methods and the static functions are
// thread-safe. Nothing here orders memory: the ring types do that.
#ifndef ZEPHON_SHM_SEGMENT_H_
#define ZEPHON_SHM_SEGMENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/env.h"
#include "shm/unique_fd.h"

namespace zephon::shm {

// Where layout-1 rings (POSIX shm names) appeared; only legacy sweeping uses it now.
inline constexpr char kDefaultShmDir[] = "/dev/shm";

enum class Access { kReadOnly, kReadWrite };

// What a reader needs to map a ring (RingWriter::ReaderFds, RingReader::Open): the data
// segment as an O_RDONLY descriptor and the cursor segment read-write. Sent to the
// reader's process with SCM_RIGHTS (shm/fd_passing.h).
struct RingFds {
  UniqueFd data;
  UniqueFd cursors;
};

class Segment {
 public:
  // Creates a memfd called `name` (shown as "/memfd:<name> (deleted)" in /proc/<pid>/fd;
  // at most 249 bytes) of exactly `bytes` bytes, fully allocated (so an exhausted memory
  // limit fails here with a Status, not with SIGBUS mid-batch), sealed against shrinking
  // and growing, mode 0600 (a reader of another uid cannot reopen it writable through
  // /proc), mapped read-write.
  // The memfd comes from `env` (Env::CreateMemfd).
  // Errors: INVALID_ARGUMENT (empty or too long name, zero size), RESOURCE_EXHAUSTED (no
  // memory for the ring, or no descriptor left: the message names the bytes or the limit
  // and the fix), INTERNAL otherwise.
  static absl::StatusOr<std::unique_ptr<Segment>> Create(const std::string& name,
                                                         uint64_t bytes,
                                                         Env* env = Env::Default());

  // Maps a segment received from its creator; its size comes from fstat. `name` is only
  // for messages. kReadOnly maps PROT_READ (the fd may be O_RDONLY); kReadWrite needs an
  // O_RDWR fd. Errors: FAILED_PRECONDITION (not sealed against shrinking: mapping it
  // would let anyone holding the fd crash us with SIGBUS; or empty), PERMISSION_DENIED
  // (writable mapping of a read-only fd), INTERNAL.
  static absl::StatusOr<std::unique_ptr<Segment>> Map(UniqueFd fd, const std::string& name,
                                                      Access access);

  // Unlinks every legacy (layout 1) POSIX shm object in `shm_dir` whose name (without the
  // leading slash) starts with `prefix` (a leading slash in `prefix` is ignored). Returns
  // how many were removed. Lists and removes through `env`.
  static absl::StatusOr<int> SweepPrefix(std::string_view prefix,
                                         const std::string& shm_dir = kDefaultShmDir,
                                         Env* env = Env::Default());

  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  // Adds the final seals: F_SEAL_FUTURE_WRITE when `forbid_new_writers` (our own mapping
  // stays writable; no process, reopening through /proc included, can map it writable or
  // write(2) it afterwards), then F_SEAL_SEAL. REQUIRES: called once, by the creator.
  // Errors: INTERNAL (the kernel refused; F_SEAL_FUTURE_WRITE needs Linux 5.1).
  absl::Status Seal(bool forbid_new_writers);

  // A new O_RDONLY descriptor of this memfd (reopened through /proc/self/fd, so it is a
  // separate open file: its holder cannot ftruncate, fallocate or mmap it writable).
  absl::StatusOr<UniqueFd> OpenReadOnly() const;
  // A dup of the (read-write) descriptor, for a process that must write the segment.
  absl::StatusOr<UniqueFd> Dup() const;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& name() const { return name_; }
  int fd() const { return fd_.get(); }

 private:
  Segment(std::string name, UniqueFd fd, uint8_t* data, uint64_t size)
      : name_(std::move(name)), fd_(std::move(fd)), data_(data), size_(size) {}

  const std::string name_;
  const UniqueFd fd_;
  uint8_t* const data_;
  const uint64_t size_;
};

}  // namespace zephon::shm

#endif  // ZEPHON_SHM_SEGMENT_H_
