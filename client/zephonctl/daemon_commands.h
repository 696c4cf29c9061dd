// `zephonctl status` and `zephonctl explain`: read-only questions to a running zephond,
// over its Unix socket (found like the clients find it) or, for status, a peer daemon's
// TCP address with optional TLS. Never starts a daemon. Thread-compatible.
#ifndef ZEPHON_CLIENT_ZEPHONCTL_DAEMON_COMMANDS_H_
#define ZEPHON_CLIENT_ZEPHONCTL_DAEMON_COMMANDS_H_

#include <string>

#include <CLI/CLI.hpp>

namespace zephon::ctl {

// Where the daemon is. Empty socket and address = DefaultSocketPath().
struct DaemonTarget {
  std::string socket;
  std::string address;  // host:port of a peer daemon (status only)
  std::string tls_ca;   // PEM files; any set = TLS on `address`
  std::string tls_cert;
  std::string tls_key;
  std::string peer_secret_file;  // the cluster's --peer-secret-file: sign the call
  double timeout_s = 10;
};

// Registers `status` and `explain` on `app`; their callbacks store the exit code in
// *exit_code. REQUIRES: exit_code outlives app.parse().
void AddDaemonCommands(CLI::App& app, int* exit_code);

}  // namespace zephon::ctl

#endif  // ZEPHON_CLIENT_ZEPHONCTL_DAEMON_COMMANDS_H_
