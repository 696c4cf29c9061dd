// Paths a daemon owns: the runtime directory that holds its socket, lock and spawn log,
// and the files it creates there or elsewhere for writing.
//
// zephond often runs as root and is auto-started from a predictable directory
// (/tmp/zephon-<uid>). Whoever can write a directory on the way to a file the daemon
// writes can make it write somewhere else: plant a symlink to a root-only file, or swap
// a directory. The rules, modelled on OpenSSH's safe_path and tmux's socket directory:
//
// - The runtime directory (the socket's parent) is private: a real directory (not a
//   symlink) owned by the daemon's uid and writable by nobody else (no group or other
//   write bit). Group read/search is allowed so that --shm-group members can reach the
//   0660 socket. A shared sticky directory such as /tmp or /run is refused here too:
//   put the socket in a subdirectory of it.
// - Every directory above it (after resolving symlinks) is trusted: owned by root or by
//   the daemon's uid, and not group/world-writable unless it is sticky (as /tmp is:
//   others may add entries but cannot rename or remove ours).
// - Files the daemon writes are opened with O_NOFOLLOW | O_CLOEXEC, and an existing one
//   must be a regular file owned by the daemon's uid with a single link (a hard link to
//   someone else's file is refused as well as a symlink).
//
// The checks take the uid as a parameter so tests running as root can exercise the
// "owned by someone else" cases. Thread-safe (no state; reads the filesystem).
#ifndef ZEPHON_COMMON_OWNED_PATH_H_
#define ZEPHON_COMMON_OWNED_PATH_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zephon {

// The verdict on one directory `path` whose lstat(2) is `st`, as the private runtime
// directory of a process running as `uid`. OK, or FAILED_PRECONDITION naming the
// directory, what is wrong and the fix.
absl::Status CheckPrivateDirStat(const std::string& path, const struct stat& st, uid_t uid);

// The verdict on one directory above a private directory (or holding a file the daemon
// writes): owned by root or `uid`, not group/world-writable unless sticky.
// FAILED_PRECONDITION naming it and the fix.
absl::Status CheckTrustedDirStat(const std::string& path, const struct stat& st, uid_t uid);

// Checks `dir` and every directory above it (symlinks resolved) with
// CheckTrustedDirStat. NOT_FOUND when `dir` does not exist.
absl::Status CheckTrustedPath(const std::string& dir, uid_t uid);

// Creates the runtime directory `dir` (and missing parents) with mode `mode` (0700, or
// 0750 for a --shm-group deployment) and, when `group` is set and this call created it,
// gives it to that group; then checks it with CheckPrivateDirStat and everything above
// it with CheckTrustedPath. An existing directory is checked, never modified.
// FAILED_PRECONDITION when a check fails; the errno's code when creation fails.
absl::Status EnsurePrivateDir(const std::string& dir, uid_t uid, mode_t mode = 0700,
                              std::optional<gid_t> group = std::nullopt);

// Opens `path` for writing with `flags` | O_CREAT | O_NOFOLLOW | O_CLOEXEC (e.g.
// O_WRONLY | O_APPEND for a log, O_RDWR for a lock) and `mode` when created, then
// refuses anything but a regular file owned by `uid` with one link. Returns the fd
// (the caller closes it). FAILED_PRECONDITION naming the file and the fix (a symlink,
// a hard link, another owner, not a regular file); the errno's code otherwise.
absl::StatusOr<int> OpenOwnedFile(const std::string& path, int flags, mode_t mode, uid_t uid);

}  // namespace zephon

#endif  // ZEPHON_COMMON_OWNED_PATH_H_
