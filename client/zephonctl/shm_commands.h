// `zephonctl shm ls|gc`: a daemon's shared memory. Since ring layout 2 rings are sealed
// memfds with no /dev/shm name: ls lists the live daemon's rings from /proc/<pid>/fd
// ("memfd:<prefix>.<pid>.<n>", pid from the daemon lock; needs zephond's uid or root),
// and they cannot leak (the kernel frees them with their last holder). ls and gc still
// handle legacy layout-1 segments in /dev/shm ("<prefix>.<pid>.<n>") left by older
// daemons: gc removes them only when no live daemon could own them (the daemon lock
// "<socket>.lock" is free and no segment's creator pid is a live zephond).
// Thread-compatible.
#ifndef ZEPHON_CLIENT_ZEPHONCTL_SHM_COMMANDS_H_
#define ZEPHON_CLIENT_ZEPHONCTL_SHM_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace zephon::ctl {

// Registers `shm` and its subcommands on `app`; their callbacks store the exit code in
// *exit_code. REQUIRES: exit_code outlives app.parse().
void AddShmCommands(CLI::App& app, int* exit_code);

}  // namespace zephon::ctl

#endif  // ZEPHON_CLIENT_ZEPHONCTL_SHM_COMMANDS_H_
