// `zephonctl shm ls|gc`: a daemon's shared-memory segments in /dev/shm
// ("<prefix>.<pid>.<n>"), and whether a live zephond owns them. gc removes them only
// when no live daemon does: the daemon lock "<socket>.lock" is free and no segment's
// creator pid is a live zephond. Thread-compatible.
#ifndef ZEPHON_CLIENT_ZEPHONCTL_SHM_COMMANDS_H_
#define ZEPHON_CLIENT_ZEPHONCTL_SHM_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace zephon::ctl {

// Registers `shm` and its subcommands on `app`; their callbacks store the exit code in
// *exit_code. REQUIRES: exit_code outlives app.parse().
void AddShmCommands(CLI::App& app, int* exit_code);

}  // namespace zephon::ctl

#endif  // ZEPHON_CLIENT_ZEPHONCTL_SHM_COMMANDS_H_
