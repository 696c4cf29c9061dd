#include "daemon/pipeline/batching/flush_regroup.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zephon::pipeline {
namespace {

uint64_t RoundUp(uint64_t v, uint64_t k) { return (v + k - 1) / k * k; }

// Where `lane` stands under the new grouping, or why it cannot move there.
absl::StatusOr<LanePosition> Regroup(std::shared_ptr<const WorkSource> source,
                                     const LaneOptions& options, uint64_t saved_k,
                                     uint32_t lane, LanePosition at) {
  const uint64_t k = options.flush_every_k_chunks;
  if (at.records_into_group == 0 && at.flush_group_chunk % k == 0) return at;
  // One record at a time under the old grouping, to see what follows the position.
  LaneOptions old = options;
  old.flush_every_k_chunks = saved_k;
  old.microbatch_size = 1;
  old.drop_last = false;
  ASSIGN_OR_RETURN(std::unique_ptr<LaneStream> stream, LaneStream::Create(source, old, lane, at));
  ASSIGN_OR_RETURN(std::optional<BatchPlan> next, stream->NextPlan());
  if (!next.has_value()) {
    // Nothing is left of this lane: any position past its data is its end.
    return LanePosition{RoundUp(stream->position().flush_group_chunk, k), 0};
  }
  uint64_t boundary = at.flush_group_chunk;
  if (at.records_into_group > 0) {
    if (next->end.flush_group_chunk == at.flush_group_chunk) {
      return absl::FailedPreconditionError(absl::StrCat(
          "flush_every_k_chunks changed from ", saved_k, " to ", k, ", but lane ", lane,
          " stands ", at.records_into_group, " records into its flush group at lane chunk ",
          at.flush_group_chunk, ", which has more: the operator state of that group "
          "(shuffle buffer, open bins, a wrap tail) cannot be regrouped. Resume with "
          "flush_every_k_chunks=", saved_k, ", or change it at a checkpoint taken where "
          "every lane has just finished a flush group"));
    }
    boundary = at.flush_group_chunk + saved_k;  // Group consumed: the next one's start.
  }
  if (boundary % k != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "flush_every_k_chunks changed from ", saved_k, " to ", k, ", but lane ", lane,
        " stands at lane chunk ", boundary, ", a flush-group boundary of ", saved_k,
        " but not of ", k, " (a new group would begin mid-way through an old one). Resume "
        "with flush_every_k_chunks=", saved_k, " or a divisor of ", boundary));
  }
  return LanePosition{boundary, 0};
}

}  // namespace

absl::StatusOr<std::vector<proto::LaneProgress>> RegroupLaneStarts(
    std::shared_ptr<const WorkSource> source, const LaneOptions& options, uint64_t saved_k,
    std::vector<proto::LaneProgress> starts) {
  if (saved_k == 0) return absl::InvalidArgumentError("saved flush_every_k_chunks is 0");
  if (saved_k == options.flush_every_k_chunks) return starts;
  for (proto::LaneProgress& p : starts) {
    ASSIGN_OR_RETURN(LanePosition at,
                     Regroup(source, options, saved_k, p.lane(),
                             LanePosition{p.flush_group_chunk(), p.records_into_group()}));
    p.set_flush_group_chunk(at.flush_group_chunk);
    p.set_records_into_group(at.records_into_group);
  }
  return starts;
}

}  // namespace zephon::pipeline
