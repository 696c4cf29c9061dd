// Read-only questions to a zephond: Explain (how each instance runs) and Status
// (instances, readers, rings). Unary RPCs with deadlines. Thread-safe.
#ifndef ZEPHON_CLIENT_DAEMON_QUERIES_H_
#define ZEPHON_CLIENT_DAEMON_QUERIES_H_

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/zephon.pb.h"

namespace zephon::client {

// Explain text of one instance (`instance_id`) or of all (empty), with node totals.
absl::StatusOr<std::string> Explain(const std::shared_ptr<grpc::Channel>& channel,
                                    const std::string& instance_id, absl::Duration timeout);

absl::StatusOr<proto::StatusReply> DaemonStatus(const std::shared_ptr<grpc::Channel>& channel,
                                                absl::Duration timeout);

}  // namespace zephon::client

#endif  // ZEPHON_CLIENT_DAEMON_QUERIES_H_
