// Finding the node's zephond, starting one when none answers.
//
// ConnectOrStart dials the Unix socket; when nothing answers and `zephond_path` is
// given, it starts a node-local daemon (detached, in its own session, with an idle
// exit) and waits for it. Two clients racing to start one is fine: the daemon lock lets
// one win and the other exits, and both clients then reach the winner.
// Thread-safe (no shared state).
#ifndef ZEPHON_CLIENT_CONNECTION_H_
#define ZEPHON_CLIENT_CONNECTION_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace zephon::client {

struct ConnectOptions {
  std::string socket_path;  // empty = DefaultSocketPath()
  std::string zephond_path;  // empty = never start a daemon
  absl::Duration timeout = absl::Seconds(15);
  // Idle exit of an auto-started daemon; the environment variable ZEPHON_IDLE_EXIT_S
  // overrides it.
  double idle_exit_s = 30;
};

// UNAVAILABLE (naming the socket and the fix) when no daemon could be reached in time.
absl::StatusOr<std::shared_ptr<grpc::Channel>> ConnectOrStart(const ConnectOptions& options);

// Converts a gRPC status to an absl::Status with the same code and message.
absl::Status FromGrpc(const grpc::Status& status);

}  // namespace zephon::client

#endif  // ZEPHON_CLIENT_CONNECTION_H_
