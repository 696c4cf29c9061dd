#include "daemon/pipeline/provenance/step_locator.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/pipeline/batching/lane_stream.h"
#include "daemon/pipeline/ordering/lanes.h"

namespace zephon::pipeline {
namespace {

// Flush groups counted per round of CountUpTo, per thread.
constexpr uint64_t kGroupsPerThreadRound = 16;

}  // namespace

absl::StatusOr<std::unique_ptr<StepLocator>> StepLocator::Create(
    ResolvedPipeline resolved, std::vector<std::shared_ptr<const Dataset>> datasets,
    int threads) {
  ASSIGN_OR_RETURN(std::unique_ptr<WorkSource> source,
                   WorkSource::Create(resolved.spec.work_source(), std::move(datasets)));
  return std::unique_ptr<StepLocator>(
      new StepLocator(std::move(resolved), std::move(source), std::max(1, threads)));
}

StepLocator::StepLocator(ResolvedPipeline resolved, std::shared_ptr<const WorkSource> source,
                         int threads)
    : resolved_(std::move(resolved)), source_(std::move(source)), threads_(threads),
      totals_(resolved_.lanes.num_lanes) {}

absl::Status StepLocator::Anchor(const std::vector<proto::LaneProgress>& lanes) {
  const uint64_t k = resolved_.lanes.flush_every_k_chunks;
  const uint64_t m = resolved_.lanes.microbatch_size;
  for (const proto::LaneProgress& p : lanes) {
    if (p.lane() >= num_lanes() || p.flush_group_chunk() % k != 0 ||
        p.records_into_group() > p.next_batch_index() * m) {
      return absl::InvalidArgumentError(absl::StrCat(
          "lane ", p.lane(), " position {batch ", p.next_batch_index(), ", chunk ",
          p.flush_group_chunk(), ", records into group ", p.records_into_group(),
          "} is not one of this spec (", num_lanes(), " lanes, flush_every_k_chunks ", k,
          ", microbatch_size ", m, ")"));
    }
    // The lane's record at its position is batch index x microbatch_size.
    LaneTotals& t = totals_[p.lane()];
    t = LaneTotals{};
    t.first_group = p.flush_group_chunk() / k;
    t.before = {p.next_batch_index() * m - p.records_into_group()};
  }
  return absl::OkStatus();
}

absl::Status StepLocator::CountUpTo(uint32_t lane, uint64_t record) {
  LaneTotals& t = totals_[lane];
  if (record < t.before.front()) t = LaneTotals{};  // before an anchor: count from the start
  const uint64_t k = resolved_.lanes.flush_every_k_chunks;
  uint64_t round = 1;  // groups per thread, doubling: a near query counts few groups
  while (!t.ended && t.before.back() <= record) {
    // The next groups, counted at once: each is a pure function of its position.
    const uint64_t first = t.first_group + t.before.size() - 1;
    const uint64_t n = round * static_cast<uint64_t>(threads_);
    round = std::min(round * 2, kGroupsPerThreadRound);
    std::vector<absl::StatusOr<std::optional<uint64_t>>> counts(
        n, absl::UnknownError("not counted"));
    auto count = [&](uint64_t from) {
      for (uint64_t i = from; i < n; i += static_cast<uint64_t>(threads_)) {
        counts[i] = LaneStream::GroupRecords(source_, resolved_.lanes, lane, (first + i) * k);
        if (counts[i].ok() && !counts[i]->has_value()) break;  // the lane ended
      }
    };
    std::vector<std::thread> helpers;
    for (int h = 1; h < threads_; ++h) helpers.emplace_back(count, static_cast<uint64_t>(h));
    count(0);
    for (std::thread& h : helpers) h.join();
    for (uint64_t i = 0; i < n; ++i) {
      if (!counts[i].ok()) return counts[i].status();
      if (!counts[i]->has_value()) {
        t.ended = true;
        break;
      }
      t.before.push_back(t.before.back() + **counts[i]);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<BatchPlan>> StepLocator::LaneBatch(uint32_t lane, uint64_t b) {
  if (lane >= num_lanes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lane ", lane, " must be < canonical_replicas ", num_lanes()));
  }
  const uint64_t record = b * resolved_.lanes.microbatch_size;
  RETURN_IF_ERROR(CountUpTo(lane, record));
  const LaneTotals& t = totals_[lane];
  if (t.before.back() <= record) return std::optional<BatchPlan>();  // past the lane's end
  // The group holding `record`: the last one that starts at or before it.
  const uint64_t i = static_cast<uint64_t>(std::upper_bound(t.before.begin(), t.before.end(),
                                                             record) -
                                            t.before.begin()) - 1;
  const LanePosition start{(t.first_group + i) * resolved_.lanes.flush_every_k_chunks,
                           record - t.before[i]};
  ASSIGN_OR_RETURN(std::unique_ptr<LaneStream> stream,
                   LaneStream::Create(source_, resolved_.lanes, lane, start, b));
  return stream->NextPlan();
}

absl::StatusOr<std::vector<StepLocator::StepBatch>> StepLocator::Step(uint64_t step,
                                                                      uint64_t global_batches,
                                                                      uint32_t dp_degree) {
  const uint32_t c = num_lanes();
  if (global_batches == 0) global_batches = c;
  if (global_batches % c != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global_batches ", global_batches, " must be a multiple of canonical_replicas ", c,
        ": a step takes the same number of batches from every lane"));
  }
  RETURN_IF_ERROR(CheckDpDegreeFitsLanes(dp_degree, c));
  const uint64_t per_lane = global_batches / c;
  std::vector<StepBatch> out;
  out.reserve(global_batches);
  for (uint32_t d = 0; d < dp_degree; ++d) {
    ASSIGN_OR_RETURN(std::vector<uint32_t> lanes,
                     OwnedLanes(c, dp_degree, d, resolved_.spec.mapping_strategy()));
    const uint64_t in_step = per_lane * lanes.size();
    for (uint64_t i = 0; i < in_step; ++i) {
      const uint64_t t = step * in_step + i;
      const uint32_t lane = lanes[t % lanes.size()];
      const uint64_t b = t / lanes.size();
      ASSIGN_OR_RETURN(std::optional<BatchPlan> plan, LaneBatch(lane, b));
      if (!plan.has_value()) {
        const uint64_t records = totals_[lane].before.back();
        const uint64_t m = resolved_.lanes.microbatch_size;
        const uint64_t batches = resolved_.lanes.drop_last ? records / m : (records + m - 1) / m;
        return absl::OutOfRangeError(absl::StrCat(
            "step ", step, " is past the end of lane ", lane, ": it has ", batches,
            " batches, so its last full step of ", global_batches, " batches is step ",
            batches / per_lane == 0 ? std::string("(none)") : absl::StrCat(batches / per_lane - 1)));
      }
      out.push_back(StepBatch{d, static_cast<uint32_t>(i), *std::move(plan)});
    }
  }
  return out;
}

}  // namespace zephon::pipeline
