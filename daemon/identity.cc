#include "daemon/identity.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/run_limits.h"

namespace zephon::daemon {

absl::StatusOr<RankIdentity> ResolveIdentity(const proto::RankOptions& options) {
  const int64_t world_size = options.has_world_size() ? options.world_size() : 1;
  if (world_size < 1 || world_size > kMaxWorldSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "world_size=", world_size, " is invalid: expected 1 <= world_size <= ", kMaxWorldSize,
        " (the number of Pipelines that call checkpoint() together; zephond's bound)"));
  }
  const int64_t global_rank = options.has_global_rank() ? options.global_rank() : 0;
  if (global_rank < 0 || global_rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global_rank=", global_rank, " is out of range for world_size=", world_size,
        ": expected 0 <= global_rank < world_size"));
  }
  const int64_t dp_degree = options.has_dp_degree() ? options.dp_degree() : world_size;
  if (dp_degree < 1 || dp_degree > world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dp_degree=", dp_degree, " is invalid for world_size=", world_size,
        ": expected 1 <= dp_degree <= world_size (dp_degree is the size of the "
        "data-parallel sub-mesh)"));
  }
  if (world_size % dp_degree != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "world_size=", world_size, " is not divisible by dp_degree=", dp_degree,
        ": every data-parallel group must have the same number of ranks "
        "(world_size = dp_degree x model-parallel degree)"));
  }
  const int64_t dp_group_id = options.has_dp_group_id() ? options.dp_group_id() : global_rank;
  if (dp_group_id < 0 || dp_group_id >= dp_degree) {
    return absl::InvalidArgumentError(absl::StrCat(
        "dp_group_id=", dp_group_id, " is out of range for dp_degree=", dp_degree,
        ": expected 0 <= dp_group_id < dp_degree",
        options.has_dp_group_id() ? "" : " (dp_group_id defaults to global_rank; set it "
                                         "from the data-parallel sub-mesh)"));
  }
  if (world_size > 1 && options.aggregate_dir().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "aggregate_dir is required when world_size > 1 (world_size=", world_size,
        "): set it to a directory every rank can read and write"));
  }
  if (world_size > 1 && options.run_id().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "run_id is required when world_size > 1 (world_size=", world_size,
        "): set it to a name unique to this training run"));
  }
  // A relative path would resolve against zephond's working directory, which the trainer
  // neither knows nor controls; the clients make theirs absolute before sending.
  const std::string& aggregate_dir = options.aggregate_dir();
  if (!aggregate_dir.empty() && aggregate_dir.front() != '/' &&
      aggregate_dir.find("://") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "aggregate_dir='", aggregate_dir, "' is a relative path, which zephond cannot resolve "
        "(it does not share the trainer's working directory): give an absolute path, "
        "file:///abs/path or s3://bucket/prefix"));
  }
  if (!options.run_id().empty() && !IsValidRunId(options.run_id())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "run_id='", options.run_id(), "' is invalid: expected 1 to 128 characters from "
        "[A-Za-z0-9._-]"));
  }

  const double timeout_s = options.aggregate_timeout_s() == 0 ? 180 : options.aggregate_timeout_s();
  if (!(timeout_s > 0 && timeout_s <= 86400)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "aggregate_timeout_s=", options.aggregate_timeout_s(),
        " is invalid: expected seconds in (0, 86400]"));
  }

  RankIdentity id;
  id.aggregate_timeout_s = timeout_s;
  id.leader_address = options.leader_address();
  id.world_size = static_cast<uint32_t>(world_size);
  id.global_rank = static_cast<uint32_t>(global_rank);
  id.dp_degree = static_cast<uint32_t>(dp_degree);
  id.dp_group_id = static_cast<uint32_t>(dp_group_id);
  id.run_id = options.run_id();
  id.aggregate_dir = options.aggregate_dir();
  const uint32_t peers_per_group = id.world_size / id.dp_degree;
  id.local_peers = options.local_peers() == 0 ? peers_per_group
                                              : std::min(options.local_peers(), peers_per_group);
  return id;
}

}  // namespace zephon::daemon
