#include "daemon/progress_log.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace zephon::daemon {
namespace {

std::vector<uint32_t> LanesOf(const std::vector<proto::LaneProgress>& progress) {
  std::vector<uint32_t> lanes;
  lanes.reserve(progress.size());
  for (const proto::LaneProgress& p : progress) lanes.push_back(p.lane());
  return lanes;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ProgressLog>> ProgressLog::Create(
    std::vector<proto::LaneProgress> start) {
  if (start.empty()) {
    return absl::InvalidArgumentError("progress log: no owned lanes");
  }
  for (size_t i = 1; i < start.size(); ++i) {
    if (start[i].lane() <= start[i - 1].lane()) {
      return absl::InvalidArgumentError(
          absl::StrCat("progress log: lanes must be strictly ascending, got lane ",
                       start[i].lane(), " after lane ", start[i - 1].lane()));
    }
  }
  return std::unique_ptr<ProgressLog>(new ProgressLog(std::move(start)));
}

ProgressLog::ProgressLog(std::vector<proto::LaneProgress> start)
    : lanes_(LanesOf(start)), base_(std::move(start)) {
  for (const proto::LaneProgress& p : base_) next_index_.push_back(p.next_batch_index());
}

size_t ProgressLog::LaneIndex(uint32_t lane) const {
  auto it = std::lower_bound(lanes_.begin(), lanes_.end(), lane);
  if (it == lanes_.end() || *it != lane) return lanes_.size();
  return static_cast<size_t>(it - lanes_.begin());
}

void ProgressLog::Apply(const Entry& e, std::vector<proto::LaneProgress>* progress) {
  proto::LaneProgress& p = (*progress)[e.lane_index];
  p.set_next_batch_index(e.lane_batch_index + 1);
  p.set_flush_group_chunk(e.end.flush_group_chunk);
  p.set_records_into_group(e.end.records_into_group);
}

absl::Status ProgressLog::Record(uint64_t seq, uint32_t lane, uint64_t lane_batch_index,
                                 pipeline::LanePosition end) {
  const size_t i = LaneIndex(lane);
  absl::MutexLock lock(&mu_);
  const uint64_t recorded = base_seq_ + entries_.size();
  if (seq != recorded) {
    return absl::FailedPreconditionError(absl::StrCat(
        "progress log: batch ", seq, " recorded out of order (expected batch ", recorded, ")"));
  }
  if (i == lanes_.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("progress log: batch ", seq, " is from lane ", lane, ", not owned"));
  }
  if (lane_batch_index != next_index_[i]) {
    return absl::FailedPreconditionError(absl::StrCat(
        "progress log: batch ", seq, " is lane ", lane, " batch ", lane_batch_index,
        ", expected lane batch ", next_index_[i]));
  }
  entries_.push_back(Entry{i, lane_batch_index, end});
  next_index_[i] = lane_batch_index + 1;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<proto::LaneProgress>> ProgressLog::ProgressAfter(
    uint64_t n_taken) const {
  absl::MutexLock lock(&mu_);
  const uint64_t recorded = base_seq_ + entries_.size();
  if (n_taken > recorded) {
    return absl::FailedPreconditionError(
        absl::StrCat("progress log: progress after ", n_taken, " batches asked, but only ", recorded,
                     " were produced"));
  }
  if (n_taken < base_seq_) {
    return absl::FailedPreconditionError(
        absl::StrCat("progress log: progress after ", n_taken,
                     " batches asked, but batches below ", base_seq_,
                     " were already released by every reader and folded"));
  }
  std::vector<proto::LaneProgress> progress = base_;
  for (uint64_t k = 0; k < n_taken - base_seq_; ++k) Apply(entries_[k], &progress);
  return progress;
}

absl::Status ProgressLog::FoldBelow(uint64_t seq) {
  absl::MutexLock lock(&mu_);
  const uint64_t recorded = base_seq_ + entries_.size();
  if (seq > recorded) {
    return absl::FailedPreconditionError(absl::StrCat(
        "progress log: fold below ", seq, " asked, but only ", recorded, " batches recorded"));
  }
  while (base_seq_ < seq) {
    Apply(entries_.front(), &base_);
    entries_.pop_front();
    ++base_seq_;
  }
  return absl::OkStatus();
}

uint64_t ProgressLog::recorded() const {
  absl::MutexLock lock(&mu_);
  return base_seq_ + entries_.size();
}

uint64_t ProgressLog::base() const {
  absl::MutexLock lock(&mu_);
  return base_seq_;
}

}  // namespace zephon::daemon
