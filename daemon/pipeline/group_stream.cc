#include "daemon/pipeline/group_stream.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace zephon::pipeline {

GroupStream::GroupStream(std::shared_ptr<const WorkSource> source, LaneOptions options,
                         std::vector<uint32_t> owned_lanes,
                         std::vector<std::unique_ptr<LaneStream>> lanes)
    : source_(std::move(source)),
      options_(options),
      owned_lanes_(std::move(owned_lanes)),
      lanes_(std::move(lanes)),
      exhausted_(lanes_.size(), false) {}

absl::StatusOr<std::unique_ptr<GroupStream>> GroupStream::Create(
    const proto::PipelineSpec& resolved_spec,
    std::vector<std::shared_ptr<const Dataset>> datasets, std::vector<uint32_t> owned_lanes) {
  ASSIGN_OR_RETURN(LaneOptions options, LaneOptions::FromSpec(resolved_spec));
  if (owned_lanes.empty()) return absl::InvalidArgumentError("owned_lanes is empty");
  for (size_t i = 1; i < owned_lanes.size(); ++i) {
    if (owned_lanes[i] <= owned_lanes[i - 1]) {
      return absl::InvalidArgumentError("owned_lanes must be strictly ascending");
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<WorkSource> ws,
                   WorkSource::Create(resolved_spec.work_source(), std::move(datasets)));
  std::shared_ptr<const WorkSource> source(std::move(ws));
  std::vector<std::unique_ptr<LaneStream>> lanes;
  for (uint32_t lane : owned_lanes) {
    ASSIGN_OR_RETURN(std::unique_ptr<LaneStream> s, LaneStream::Create(source, options, lane));
    lanes.push_back(std::move(s));
  }
  return std::unique_ptr<GroupStream>(
      new GroupStream(std::move(source), options, std::move(owned_lanes), std::move(lanes)));
}

absl::StatusOr<std::optional<BatchPlan>> GroupStream::NextPlan() {
  for (size_t tries = 0; tries < lanes_.size(); ++tries) {
    const size_t i = next_;
    next_ = (next_ + 1) % lanes_.size();
    if (exhausted_[i]) continue;
    ASSIGN_OR_RETURN(std::optional<BatchPlan> plan, lanes_[i]->NextPlan());
    if (plan.has_value()) return plan;
    exhausted_[i] = true;
  }
  return std::optional<BatchPlan>();
}

absl::StatusOr<std::optional<Batch>> GroupStream::Next() {
  ASSIGN_OR_RETURN(std::optional<BatchPlan> plan, NextPlan());
  if (!plan.has_value()) return std::optional<Batch>();
  ASSIGN_OR_RETURN(Batch batch, Materialize(*plan, source_->datasets()));
  return std::optional<Batch>(std::move(batch));
}

uint64_t GroupStream::dropped_tokens() const {
  uint64_t total = 0;
  for (const auto& l : lanes_) total += l->dropped_tokens();
  return total;
}

std::string GroupStream::Explain() const {
  return absl::StrCat("work source: ", source_->Describe(), "\n",
                      "lanes: ", absl::StrJoin(owned_lanes_, ","), " of ", options_.num_lanes,
                      " (routing ", options_.routing == Routing::kPermute ? "permute" : "modulo",
                      ", strict round robin)\n",
                      "operators per lane: ", options_.Describe(), "\n");
}

}  // namespace zephon::pipeline
