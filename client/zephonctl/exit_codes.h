// zephonctl's process exit codes, shared by every command (and listed in `--help`).
//
//   0  ok
//   1  the operation failed (a bad checkpoint file, a daemon error, an I/O error)
//   2  usage error (unknown command or flag, missing argument)
//   3  refused: a live zephond owns the segments (shm gc), or liveness is unknown
//   4  the daemon is unreachable (nothing answers on the socket or address)
#ifndef ZEPHON_CLIENT_ZEPHONCTL_EXIT_CODES_H_
#define ZEPHON_CLIENT_ZEPHONCTL_EXIT_CODES_H_

#include "absl/status/status.h"

namespace zephon::ctl {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitRefused = 3;
inline constexpr int kExitUnreachable = 4;

// The exit code of a failed call to zephond: unreachable (4) when nothing answered in
// time, failed (1) otherwise.
inline int ExitCodeFor(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
                 status.code() == absl::StatusCode::kDeadlineExceeded
             ? kExitUnreachable
             : kExitFailed;
}

inline constexpr char kExitCodesHelp[] =
    "Exit codes: 0 ok, 1 operation failed (bad checkpoint, daemon error), 2 usage, "
    "3 refused (a live zephond owns the segments), 4 daemon unreachable.";

}  // namespace zephon::ctl

#endif  // ZEPHON_CLIENT_ZEPHONCTL_EXIT_CODES_H_
