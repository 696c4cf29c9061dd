// Whole-file reads, shared by the daemon (PEM files, checkpoint files) and zephonctl.
// Thread-safe (no shared state).
#ifndef ZEPHON_COMMON_FILE_IO_H_
#define ZEPHON_COMMON_FILE_IO_H_

#include <string>

#include "absl/status/statusor.h"

namespace zephon {

// The whole content of `path`. Errors follow errno (NOT_FOUND, PERMISSION_DENIED, ...)
// and name the path and the failing step ("cannot open <path>", "cannot read <path>").
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace zephon

#endif  // ZEPHON_COMMON_FILE_IO_H_
