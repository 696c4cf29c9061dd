#include "daemon/pipeline/batching/group_stream.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/pipeline/batching/flush_regroup.h"
#include "daemon/pipeline/spec_string_form.h"

namespace zephon::pipeline {
namespace {

// The starting progress of each owned lane: zeros, or its entry of `restore`.
absl::StatusOr<std::vector<proto::LaneProgress>> StartingProgress(
    const std::vector<uint32_t>& owned_lanes, uint32_t num_lanes,
    const std::vector<proto::LaneProgress>* restore) {
  std::vector<proto::LaneProgress> out;
  if (restore == nullptr) {
    for (uint32_t lane : owned_lanes) {
      out.emplace_back();
      out.back().set_lane(lane);
    }
    return out;
  }
  std::map<uint32_t, const proto::LaneProgress*> by_lane;
  for (const proto::LaneProgress& p : *restore) {
    if (p.lane() >= num_lanes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "restore: progress names lane ", p.lane(), " but canonical_replicas is ", num_lanes));
    }
    if (!by_lane.emplace(p.lane(), &p).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("restore: lane ", p.lane(), " has more than one progress entry"));
    }
  }
  for (uint32_t lane : owned_lanes) {
    auto it = by_lane.find(lane);
    if (it == by_lane.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("restore: no progress for owned lane ", lane, " (the checkpoint has ",
                       by_lane.size(), " lane entries)"));
    }
    out.push_back(*it->second);
  }
  return out;
}

}  // namespace

GroupStream::GroupStream(std::shared_ptr<const WorkSource> source, LaneOptions options,
                         std::vector<uint32_t> owned_lanes,
                         std::vector<std::unique_ptr<LaneStream>> lanes,
                         std::vector<proto::LaneProgress> progress)
    : source_(std::move(source)),
      options_(options),
      owned_lanes_(std::move(owned_lanes)),
      lanes_(std::move(lanes)),
      exhausted_(lanes_.size(), false),
      progress_(std::move(progress)) {
  for (const auto& lane : lanes_) pack_stats_.push_back(lane->stats());
  for (const auto& lane : lanes_) {
    if (lane->mixture_stats() != nullptr) mixture_stats_.push_back(lane->mixture_stats());
  }
}

absl::StatusOr<std::unique_ptr<GroupStream>> GroupStream::Create(
    const ResolvedPipeline& resolved,
    std::vector<std::shared_ptr<const Dataset>> datasets, std::vector<uint32_t> owned_lanes,
    const std::vector<proto::LaneProgress>* restore, uint64_t saved_flush_every_k_chunks) {
  const LaneOptions& options = resolved.lanes;
  if (owned_lanes.empty()) return absl::InvalidArgumentError("owned_lanes is empty");
  for (size_t i = 1; i < owned_lanes.size(); ++i) {
    if (owned_lanes[i] <= owned_lanes[i - 1]) {
      return absl::InvalidArgumentError("owned_lanes must be strictly ascending");
    }
  }
  ASSIGN_OR_RETURN(std::vector<proto::LaneProgress> progress,
                   StartingProgress(owned_lanes, options.num_lanes, restore));
  ASSIGN_OR_RETURN(std::unique_ptr<WorkSource> ws,
                   WorkSource::Create(resolved.spec.work_source(), std::move(datasets)));
  std::shared_ptr<const WorkSource> source(std::move(ws));
  if (restore != nullptr && saved_flush_every_k_chunks != 0) {
    ASSIGN_OR_RETURN(progress, RegroupLaneStarts(source, options, saved_flush_every_k_chunks,
                                                 std::move(progress)));
  }
  std::vector<std::unique_ptr<LaneStream>> lanes;
  for (size_t i = 0; i < owned_lanes.size(); ++i) {
    const proto::LaneProgress& p = progress[i];
    ASSIGN_OR_RETURN(std::unique_ptr<LaneStream> s,
                     LaneStream::Create(source, options, owned_lanes[i],
                                        LanePosition{p.flush_group_chunk(), p.records_into_group()},
                                        p.next_batch_index()));
    lanes.push_back(std::move(s));
  }
  return std::unique_ptr<GroupStream>(new GroupStream(std::move(source), options,
                                                      std::move(owned_lanes), std::move(lanes),
                                                      std::move(progress)));
}

absl::StatusOr<std::optional<BatchPlan>> GroupStream::NextPlan() {
  while (true) {
    if (cancelled_ != nullptr && cancelled_->load(std::memory_order_relaxed)) {
      return absl::CancelledError("the batch stream was cancelled");
    }
    // Least (next_batch_index, lane): lanes_ is in ascending lane order, so a strict
    // comparison keeps the lower lane on ties.
    size_t best = lanes_.size();
    for (size_t i = 0; i < lanes_.size(); ++i) {
      if (exhausted_[i]) continue;
      if (best == lanes_.size() ||
          progress_[i].next_batch_index() < progress_[best].next_batch_index()) {
        best = i;
      }
    }
    if (best == lanes_.size()) return std::optional<BatchPlan>();
    ASSIGN_OR_RETURN(std::optional<BatchPlan> plan, lanes_[best]->NextPlan());
    if (!plan.has_value()) {
      exhausted_[best] = true;
      continue;
    }
    proto::LaneProgress& p = progress_[best];
    p.set_next_batch_index(plan->lane_batch_index + 1);
    p.set_flush_group_chunk(plan->end.flush_group_chunk);
    p.set_records_into_group(plan->end.records_into_group);
    return plan;
  }
}

absl::StatusOr<std::optional<Batch>> GroupStream::Next() {
  ASSIGN_OR_RETURN(std::optional<BatchPlan> plan, NextPlan());
  if (!plan.has_value()) return std::optional<Batch>();
  ASSIGN_OR_RETURN(Batch batch, Materialize(*plan, source_->datasets()));
  return std::optional<Batch>(std::move(batch));
}

uint64_t GroupStream::dropped_tokens() const { return PackingTotal().dropped_tokens; }

std::vector<PackFigures> GroupStream::Packing() const {
  std::vector<PackFigures> out;
  for (size_t i = 0; i < pack_stats_.size(); ++i) {
    out.push_back(pack_stats_[i]->Snapshot(owned_lanes_[i]));
  }
  return out;
}

PackFigures GroupStream::PackingTotal() const { return SumPackFigures(Packing()); }

std::vector<MixtureFigures> GroupStream::Mixture() const {
  std::vector<MixtureFigures> out;
  for (size_t i = 0; i < mixture_stats_.size(); ++i) {
    out.push_back(mixture_stats_[i]->Snapshot(owned_lanes_[i]));
  }
  return out;
}

std::string GroupStream::Explain() const {
  return absl::StrCat("work source: ", source_->Describe(), "\n",
                      "lanes: ", absl::StrJoin(owned_lanes_, ","), " of ", options_.num_lanes,
                      " (routing ", OptionName(options_.routing),
                      ", round robin by least progress)\n",
                      "operators per lane: ", options_.Describe(), "\n");
}

}  // namespace zephon::pipeline
