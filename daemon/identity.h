// Resolving and validating who an attaching rank is.
//
// A rank presents RankOptions (coordination identity world_size/global_rank, data
// identity dp_degree/dp_group_id, run_id, aggregate_dir). ResolveIdentity applies the
// guide's defaults (dp_degree = world_size, dp_group_id = global_rank) and every check
// of the rank's options; each error names the option, the values and the fix. The lane
// count (canonical_replicas) belongs to the spec: ResolveAttach (resolve_attach.h) sets
// it here once the spec is resolved. Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_IDENTITY_H_
#define ZEPHON_DAEMON_IDENTITY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/run_id.h"
#include "proto/spec.pb.h"

namespace zephon::daemon {

struct RankIdentity {
  uint32_t world_size = 1;
  uint32_t global_rank = 0;
  uint32_t dp_degree = 1;
  uint32_t dp_group_id = 0;
  // The resolved spec's lane count; set by ResolveAttach, not by ResolveIdentity.
  uint32_t canonical_replicas = 1;
  // Empty only for a single-rank run that did not name itself (never shared).
  std::string run_id;
  std::string aggregate_dir;
  // How long a checkpoint round waits for every rank (seconds).
  double aggregate_timeout_s = 180;
  // Explicit leader address for checkpoint rounds; empty = rendezvous file.
  std::string leader_address;
  // Ranks of this DP group expected to attach on this node (>= 1).
  uint32_t local_peers = 1;
  // Non-fatal findings to hand back to the client (e.g. uneven lanes).
  std::vector<std::string> warnings;
};

// Every integer option is validated as int64 against its range (world_size against
// common/run_limits.h) before it is narrowed to uint32.
absl::StatusOr<RankIdentity> ResolveIdentity(const proto::RankOptions& options);

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_IDENTITY_H_
