// zephond: the per-node Zephon daemon. See docs/design.md and README.md.
//
// Flags: daemon/daemon_flags.h (also readable from --config FILE). Start, the main
// loop and the shutdown order: daemon/daemon.h. Exits 0 on SIGTERM/SIGINT, and by
// itself after --idle-exit-s seconds without readers when a client auto-started it;
// 2 for bad flags, 3 when another zephond holds the socket, 4 for the environment.
#include <cstdio>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "daemon/daemon.h"
#include "daemon/daemon_flags.h"

int main(int argc, char** argv) {
  namespace daemon = zephon::daemon;
  CLI::App app{"zephond: Zephon's per-node data-loading daemon"};
  daemon::DaemonFlags flags = daemon::DaemonFlags::Defaults();
  daemon::AddDaemonFlags(app, &flags);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? daemon::kExitClean : daemon::kExitBadFlags;
  }
  if (absl::Status valid = daemon::ValidateDaemonFlags(flags); !valid.ok()) {
    std::fprintf(stderr, "zephond: %s\n", std::string(valid.message()).c_str());
    return daemon::ExitCodeFor(valid);
  }
  absl::StatusOr<std::unique_ptr<daemon::Daemon>> zephond =
      daemon::Daemon::Start(std::move(flags));
  if (!zephond.ok()) return daemon::ExitCodeFor(zephond.status());
  (*zephond)->Run();
  (*zephond)->Shutdown();
  return daemon::kExitClean;
}
