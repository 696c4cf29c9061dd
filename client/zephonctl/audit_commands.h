// `zephonctl audit`: reads zephond's audit logs (daemon/audit/audit_log.h).
//
//   zephonctl audit diff DIR_A DIR_B [--steps A:B] [--global-batches B] [--json]
//     The first global step whose batches differ between two runs, and which samples
//     differ; exit 0 when every step both runs hold is the same, 1 when one differs.
//   zephonctl audit verify DIR --spec FILE [--json]
//     Recomputes every audited batch from the spec (or a checkpoint of the run) and
//     checks its samples and the SHA-256 of its tokens: what was delivered is what the
//     spec says. Exit 1 at the first batch that is not.
// DIR is an audit directory (<aggregate_dir>/<run>/audit, or <--audit-dir>/<run>), or
// the run's directory holding audit/. Thread-compatible; no shared state.
#ifndef ZEPHON_CLIENT_ZEPHONCTL_AUDIT_COMMANDS_H_
#define ZEPHON_CLIENT_ZEPHONCTL_AUDIT_COMMANDS_H_

#include <CLI/CLI.hpp>

namespace zephon::ctl {

void AddAuditCommands(CLI::App& app, int* exit_code);

}  // namespace zephon::ctl

#endif  // ZEPHON_CLIENT_ZEPHONCTL_AUDIT_COMMANDS_H_
