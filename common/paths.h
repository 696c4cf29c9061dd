// Where a node's zephond listens and how its shm objects are named. Shared by the
// daemon, the clients and zephonctl so that they agree without configuration.
//
// Socket: $ZEPHON_SOCKET, else $XDG_RUNTIME_DIR/zephon/zephond.sock, else
// /tmp/zephon-<uid>/zephond.sock. Shm prefix: "zephon.<uid>.<hash of the socket path>",
// so daemons with different sockets (tests simulating nodes) never touch each other's
// segments. Thread-safe (reads the environment only).
// The socket's directory must be private to the daemon's uid (common/owned_path.h):
// zephond and the client's auto-start create it 0700 and refuse one that is not.
#ifndef ZEPHON_COMMON_PATHS_H_
#define ZEPHON_COMMON_PATHS_H_

#include <string>

namespace zephon {

std::string DefaultSocketPath();
std::string DefaultShmPrefix(const std::string& socket_path);
// The daemon lock file guarding one socket: "<socket>.lock".
std::string LockPathFor(const std::string& socket_path);

}  // namespace zephon

#endif  // ZEPHON_COMMON_PATHS_H_
