// Env: the operating system as zephond's components use it (the clock, the few file
// operations they perform, sealed-memfd creation), behind one interface so a test can
// fake time and inject I/O faults, as LevelDB's Env does. A component takes
// `Env* env = Env::Default()` in its options and calls nothing of this directly.
//
// Env::Default() is a stateless singleton over POSIX and absl's clock: it has no
// settings and no mutable state, so nothing can be configured through it and it is not a
// process global in the sense of state shared by callers. Tests pass their own Env
// (common/fake_env.h) instead.
//
// Clocks: decisions ("is this round past its deadline", "is this signature within the
// skew window", "was a line logged within the interval") compare env->Now(). Blocking
// waits (absl::CondVar, futex, poll) still sleep in real time; a component whose wait
// ends at an env->Now()-based deadline waits for the difference, and something that
// changes the decision (another call, a Finish) must wake it.
//
// Thread-safety: every Env is thread-safe. An Env passed to a component must outlive it.
#ifndef ZEPHON_COMMON_ENV_H_
#define ZEPHON_COMMON_ENV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zephon {

// What Env::Stat reports (links followed).
struct FileStat {
  uint64_t size = 0;
  absl::Time mtime;  // to the nanosecond
  uint64_t inode = 0;
  bool is_regular = false;
  bool is_directory = false;
};

// A file opened for reading (Env::OpenForRead). Reads and stats go to the open file, not
// its path: a rename over the path after the open does not change what they see.
// Closed on destruction. Thread-safety: thread-safe (pread and fstat on one descriptor).
class ReadableFile {
 public:
  virtual ~ReadableFile() = default;

  // fstat(2) of the open file. Errors follow errno, naming the path ("cannot stat <path>").
  virtual absl::StatusOr<FileStat> Stat() = 0;

  // Up to `length` bytes at `offset`, fewer only at the end of the file (none past it).
  // Errors follow errno (absl::ErrnoToStatus), naming the path ("cannot read <path>").
  virtual absl::StatusOr<std::string> ReadAt(uint64_t offset, uint64_t length) = 0;
};

class Env {
 public:
  virtual ~Env() = default;

  // The real implementation (see the file comment). Never null, never destroyed.
  static Env* Default();

  virtual absl::Time Now() = 0;
  virtual void SleepFor(absl::Duration duration) = 0;

  // The whole file. Errors follow errno (NOT_FOUND, PERMISSION_DENIED, ...) and name
  // the path and the step ("cannot open <path>", "cannot read <path>").
  virtual absl::StatusOr<std::string> ReadFile(const std::string& path) = 0;

  // Opens `path` (links followed) for ReadableFile's reads and stats. A directory opens
  // too: check Stat().is_regular. Errors follow errno (NOT_FOUND, PERMISSION_DENIED, ...)
  // and read "cannot open <path>: <strerror>".
  virtual absl::StatusOr<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) = 0;

  // Replaces `path` with `bytes`: temp file, fsync, rename, directory fsync; on error the
  // temp file is gone and `path` is untouched. Contract and errors: common/atomic_file.h.
  virtual absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes) = 0;

  // Entry names in `dir` (not "." or ".."), in directory order. NOT_FOUND ("no such
  // directory: <dir>") when it or a parent is missing or is not a directory; other errors
  // follow errno, naming the dir.
  virtual absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir) = 0;

  // Removes a file. NOT_FOUND when absent; other errors follow errno, naming the path.
  virtual absl::Status RemoveFile(const std::string& path) = 0;

  // stat(2) of `path`. NOT_FOUND ("no such file: <path>") when it or a parent is
  // missing; other errors follow errno, naming the path.
  virtual absl::StatusOr<FileStat> Stat(const std::string& path) = 0;

  // A new, empty memfd called `name`, close-on-exec and sealable (MFD_ALLOW_SEALING):
  // what shm::Segment sizes, seals and maps. The caller owns the returned descriptor.
  // Errors follow errno (EMFILE, ENFILE, ENOMEM: RESOURCE_EXHAUSTED) and read
  // "memfd_create(<name>): <strerror>".
  virtual absl::StatusOr<int> CreateMemfd(const std::string& name) = 0;
};

}  // namespace zephon

#endif  // ZEPHON_COMMON_ENV_H_
