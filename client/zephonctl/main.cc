// zephonctl: the operator's tool for a node's zephond, its shared memory and its runs'
// checkpoint files.
//
//   zephonctl status [--socket S | --address host:port [--tls-ca/--tls-cert/--tls-key]] [--json]
//   zephonctl explain [--instance ID] [--json]
//   zephonctl checkpoint ls AGG_DIR [--run RUN] [--json]
//   zephonctl checkpoint inspect FILE [--json]
//   zephonctl checkpoint verify FILE...
//   zephonctl checkpoint prune AGG_DIR --run RUN --keep-last N [--dry-run]
//     (AGG_DIR and FILE may be s3:// URLs; --s3-endpoint/--s3-region/... or AWS_*)
//   zephonctl shm ls [--prefix P] [--socket S] [--json]
//   zephonctl shm gc [--prefix P] [--socket S]
//   zephonctl which --spec FILE (--step N | --sample D/S/I) [--global-batches B] [--dp-degree D]
//                   [--tokens] [--text TOKENIZER] [--json]
//   zephonctl audit diff RUN_A RUN_B [--steps A:B] [--global-batches B] [--json]
//   zephonctl audit verify RUN --spec FILE [--json]
//
// Exit codes (client/zephonctl/exit_codes.h): 0 ok, 1 operation failed (e.g. verify
// found a bad file, daemon error), 2 usage, 3 refused (a live daemon owns the segments),
// 4 daemon unreachable.
//
// Commands work with absl::Status inside; CLI11's exceptions (and any other) are caught
// here, at the edge, and turned into exit codes.
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "client/zephonctl/audit_commands.h"
#include "client/zephonctl/checkpoint_commands.h"
#include "client/zephonctl/daemon_commands.h"
#include "client/zephonctl/exit_codes.h"
#include "client/zephonctl/shm_commands.h"
#include "client/zephonctl/which_command.h"

int main(int argc, char** argv) {
  using namespace zephon::ctl;
  CLI::App app{
      "zephonctl: inspect a node's zephond, its shared memory, checkpoint files and what a "
      "run's steps hold"};
  app.footer(kExitCodesHelp);
  app.require_subcommand(1);
  int exit_code = kExitOk;
  try {
    AddDaemonCommands(app, &exit_code);
    AddCheckpointCommands(app, &exit_code);
    AddShmCommands(app, &exit_code);
    AddWhichCommand(app, &exit_code);
    AddAuditCommands(app, &exit_code);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, or the error with a hint
    return code == 0 ? kExitOk : kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "zephonctl: " << e.what() << "\n";
    return kExitFailed;
  }
  return exit_code;
}
