// Atomic whole-file replacement, shared by checkpoint files, rendezvous files and the
// local object store. Thread-safe (no shared state).
#ifndef ZEPHON_COMMON_ATOMIC_FILE_H_
#define ZEPHON_COMMON_ATOMIC_FILE_H_

#include <functional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace zephon {

// Every temporary file WriteFileAtomically creates is named
// "<dir>/.zephon-tmp.<target name>.XXXXXX", so listings can skip writes in flight.
inline constexpr char kAtomicTempPrefix[] = ".zephon-tmp.";

// Replaces `path` with `bytes` atomically: creates missing parent directories, writes a
// temporary file in the same directory (mode 0644), fsyncs it, renames it over `path`,
// fsyncs the directory. On any error the temporary file is removed and `path` is
// untouched (the old content, or absent). Errors name the path and the failing step;
// the code follows errno (NOT_FOUND, PERMISSION_DENIED, RESOURCE_EXHAUSTED for a full
// disk, ...).
absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes);

// The two steps of WriteFileAtomically that a fault-injecting Env (common/fake_env.h)
// replaces, so an injected failure strikes part-way and the cleanup above really runs.
// Each returns 0 or an errno. Empty members use the real write(2) loop / rename(2).
struct AtomicWriteSteps {
  std::function<int(int fd, std::string_view bytes)> write_all;
  std::function<int(const std::string& from, const std::string& to)> rename;
};
absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes,
                                 const AtomicWriteSteps& steps);

}  // namespace zephon

#endif  // ZEPHON_COMMON_ATOMIC_FILE_H_
