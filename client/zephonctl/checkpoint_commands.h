// `zephonctl checkpoint ls|inspect|verify`: offline questions about merged checkpoint
// files under aggregate_dir/<run_id>/checkpoint-<round>.zckpt (format:
// daemon/checkpoint/checkpoint_file.h). They never talk to a daemon. Thread-compatible.
#ifndef ZEPHON_CLIENT_ZEPHONCTL_CHECKPOINT_COMMANDS_H_
#define ZEPHON_CLIENT_ZEPHONCTL_CHECKPOINT_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace zephon::ctl {

// Registers `checkpoint` and its subcommands on `app`; their callbacks store the exit
// code in *exit_code. REQUIRES: exit_code outlives app.parse().
void AddCheckpointCommands(CLI::App& app, int* exit_code);

}  // namespace zephon::ctl

#endif  // ZEPHON_CLIENT_ZEPHONCTL_CHECKPOINT_COMMANDS_H_
