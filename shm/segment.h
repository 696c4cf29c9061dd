// File: shm/segment.h
//
// Segment: RAII owner of one mapping of a POSIX shared-memory object (shm_open + mmap).
// It owns the mapping, not the name: destroying a Segment unmaps, and only Unlink()
// removes the name (the memory lives until the last process unmaps it).
//
// Create() is the daemon's path: create-only, explicit mode (umask does not apply),
// free-space check on the shm mount, and posix_fallocate of the whole size so a full
// tmpfs fails here with a Status instead of SIGBUS on first touch mid-batch.
//
// Thread safety: a Segment is immutable after construction; the static functions are
// thread-safe. Nothing here orders memory: the ring types do that.
#ifndef ZEPHON_SHM_SEGMENT_H_
#define ZEPHON_SHM_SEGMENT_H_

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zephon::shm {

inline constexpr char kDefaultShmDir[] = "/dev/shm";

struct SegmentOptions {
  // Directory where POSIX shm names appear (statvfs'd for free space). glibc's shm_open
  // always uses /dev/shm; override only to check or sweep another mount.
  std::string shm_dir = kDefaultShmDir;
  // Test seam: treat the mount as having at most this many free bytes.
  std::optional<uint64_t> free_bytes_limit;
  // Group owner of created segments (for ranks running as another user in that group;
  // pair it with mode 0660). Unset: the creator's group.
  std::optional<gid_t> group;
};

class Segment {
 public:
  // Creates `name` ("/something", one leading slash, no other) with exactly `bytes`
  // bytes and permissions `mode`, fully allocated and mapped read-write.
  // Errors: INVALID_ARGUMENT (bad name or zero size), ALREADY_EXISTS (name taken: a stale
  // segment, sweep it), RESOURCE_EXHAUSTED (not enough space on the shm mount; the
  // message states bytes needed, bytes free and how to enlarge /dev/shm), INTERNAL for
  // other syscall failures. On error nothing is left behind.
  static absl::StatusOr<std::unique_ptr<Segment>> Create(const std::string& name,
                                                         uint64_t bytes, mode_t mode,
                                                         const SegmentOptions& options = {});

  // Maps an existing segment read-write; its size comes from fstat.
  // Errors: NOT_FOUND, PERMISSION_DENIED, FAILED_PRECONDITION (empty object), INTERNAL.
  static absl::StatusOr<std::unique_ptr<Segment>> Open(const std::string& name);

  // Removes the name. NOT_FOUND if it does not exist.
  static absl::Status Unlink(const std::string& name);

  // Unlinks every shm object in `shm_dir` whose name (without the leading slash) starts
  // with `prefix` (a leading slash in `prefix` is ignored). Returns how many were removed.
  static absl::StatusOr<int> SweepPrefix(std::string_view prefix,
                                         const std::string& shm_dir = kDefaultShmDir);

  ~Segment();
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;

  uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  Segment(std::string name, uint8_t* data, uint64_t size)
      : name_(std::move(name)), data_(data), size_(size) {}

  const std::string name_;
  uint8_t* const data_;
  const uint64_t size_;
};

}  // namespace zephon::shm

#endif  // ZEPHON_SHM_SEGMENT_H_
