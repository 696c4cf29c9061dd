#include "daemon/pipeline/provenance/step_locator.h"

#include <algorithm>
#include <set>
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

std::vector<uint32_t> SegmentRows(const BatchPlan& plan) {
  std::vector<uint32_t> rows;
  rows.reserve(plan.segments.size());
  uint64_t filled = 0;
  for (size_t i = 0; i < plan.segments.size(); ++i) {
    rows.push_back(plan.cols == 0 ? static_cast<uint32_t>(i)
                                  : static_cast<uint32_t>(filled / plan.cols));
    filled += plan.segments[i].count;
  }
  return rows;
}

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
      totals_(resolved_.lanes.num_lanes), anchors_(resolved_.lanes.num_lanes) {}

absl::Status StepLocator::Anchor(const std::vector<proto::LaneProgress>& lanes) {
  for (const proto::LaneProgress& p : lanes) {
    RETURN_IF_ERROR(AddAnchor(p.lane(), p.next_batch_index(),
                              LanePosition{p.flush_group_chunk(), p.records_into_group()}));
  }
  return absl::OkStatus();
}

absl::Status StepLocator::AddAnchor(uint32_t lane, uint64_t batch, const LanePosition& at) {
  const uint64_t k = resolved_.lanes.flush_every_k_chunks;
  const uint64_t m = resolved_.lanes.microbatch_size;
  if (lane >= num_lanes() || at.flush_group_chunk % k != 0 ||
      at.records_into_group > batch * m) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lane ", lane, " position {batch ", batch, ", chunk ", at.flush_group_chunk,
        ", records into group ", at.records_into_group, "} is not one of this spec (",
        num_lanes(), " lanes, flush_every_k_chunks ", k, ", microbatch_size ", m, ")"));
  }
  // The lane's record at its position is batch index x microbatch_size.
  anchors_[lane][at.flush_group_chunk / k] = batch * m - at.records_into_group;
  return absl::OkStatus();
}

uint64_t StepLocator::anchors() const {
  uint64_t n = 0;
  for (const auto& lane : anchors_) n += lane.size();
  return n;
}

void StepLocator::ForEachCountedGroupStart(
    const std::function<void(uint32_t, uint64_t, const LanePosition&)>& visit) const {
  const uint64_t k = resolved_.lanes.flush_every_k_chunks;
  const uint64_t m = resolved_.lanes.microbatch_size;
  if (m == 0) return;
  for (uint32_t lane = 0; lane < totals_.size(); ++lane) {
    const LaneTotals& t = totals_[lane];
    for (size_t i = 0; i + 1 < t.before.size(); ++i) {
      const uint64_t batch = (t.before[i] + m - 1) / m;  // the first starting at or after it
      if (batch * m >= t.before[i + 1]) continue;       // starts in a later group
      visit(lane, batch, LanePosition{(t.first_group + i) * k, batch * m - t.before[i]});
    }
  }
}

void StepLocator::StartAtAnchor(uint32_t lane, std::optional<uint64_t> record,
                                std::optional<uint64_t> group) {
  const std::map<uint64_t, uint64_t>& anchors = anchors_[lane];
  LaneTotals& t = totals_[lane];
  const uint64_t counted_end = t.first_group + t.before.size() - 1;  // first uncounted group
  // The best anchor: the last one at or before the target.
  auto best = anchors.end();
  if (group.has_value()) {
    best = anchors.upper_bound(*group);
  } else {
    best = std::find_if(anchors.begin(), anchors.end(),
                        [&](const auto& a) { return a.second > *record; });
  }
  const bool below = record.has_value() ? *record < t.before.front() : *group < t.first_group;
  if (best != anchors.begin()) {
    --best;
    // Useful when the counts do not reach the target yet and the anchor is further on,
    // or when the target lies before the counts.
    const bool reached = record.has_value() ? (t.ended || t.before.back() > *record)
                                            : (t.ended || counted_end > *group);
    if (below || (!reached && best->first > counted_end)) {
      t = LaneTotals{};
      t.first_group = best->first;
      t.before = {best->second};
      return;
    }
  }
  if (below) t = LaneTotals{};  // before every anchor: count from the lane's start
}

bool StepLocator::FullGroupsBefore(uint32_t lane, uint64_t group) {
  const LaneOptions& o = resolved_.lanes;
  // Records are samples, none dropped, and every chunk holds chunk_size of them (a
  // schedule's chunks may differ by a few): group g starts at record g * k * chunk_size.
  if (!o.records || o.mixture.enabled || source_->phase_schedule() != nullptr) return false;
  const std::optional<uint64_t> chunks = source_->NumChunks();
  const uint64_t first_chunk = group * o.flush_every_k_chunks;
  if (chunks && GlobalChunkOfLane(lane, first_chunk, o.num_lanes, o.routing, o.routing_seed) >=
                    *chunks) {
    return false;  // the lane ends before it: count up to the end instead
  }
  LaneTotals& t = totals_[lane];
  if (t.first_group <= group && group < t.first_group + t.before.size()) return true;
  t = LaneTotals{};
  t.first_group = group;
  t.before = {first_chunk * source_->chunk_size()};
  return true;
}

absl::Status StepLocator::CountUpTo(uint32_t lane, uint64_t record) {
  const LaneOptions& o = resolved_.lanes;
  // Record pipelines jump to the group holding the record: O(1), whatever the step.
  if (!FullGroupsBefore(lane, record / (o.flush_every_k_chunks * source_->chunk_size()))) {
    StartAtAnchor(lane, record, std::nullopt);
  }
  return Count(lane, [record](const LaneTotals& t) { return t.before.back() <= record; });
}

absl::Status StepLocator::CountGroupsThrough(uint32_t lane, uint64_t group) {
  if (!FullGroupsBefore(lane, group)) StartAtAnchor(lane, std::nullopt, group);
  return Count(lane, [group](const LaneTotals& t) {
    return t.first_group + t.before.size() - 1 <= group;  // group's end not counted yet
  });
}

absl::Status StepLocator::Count(uint32_t lane,
                                const std::function<bool(const LaneTotals&)>& more) {
  LaneTotals& t = totals_[lane];
  const uint64_t k = resolved_.lanes.flush_every_k_chunks;
  uint64_t round = 1;  // groups per thread, doubling: a near query counts few groups
  while (!t.ended && more(t)) {
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

absl::StatusOr<std::unique_ptr<LaneStream>> StepLocator::StreamAt(uint32_t lane, uint64_t b) {
  const uint64_t record = b * resolved_.lanes.microbatch_size;
  RETURN_IF_ERROR(CountUpTo(lane, record));
  const LaneTotals& t = totals_[lane];
  if (t.before.back() <= record) return std::unique_ptr<LaneStream>();  // past the end
  // The group holding `record`: the last one that starts at or before it.
  const uint64_t i = static_cast<uint64_t>(std::upper_bound(t.before.begin(), t.before.end(),
                                                             record) -
                                            t.before.begin()) - 1;
  const LanePosition start{(t.first_group + i) * resolved_.lanes.flush_every_k_chunks,
                           record - t.before[i]};
  return LaneStream::Create(source_, resolved_.lanes, lane, start, b);
}

absl::StatusOr<std::optional<BatchPlan>> StepLocator::LaneBatch(uint32_t lane, uint64_t b) {
  if (lane >= num_lanes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("lane ", lane, " must be < canonical_replicas ", num_lanes()));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<LaneStream> stream, StreamAt(lane, b));
  if (stream == nullptr) return std::optional<BatchPlan>();
  return stream->NextPlan();
}

absl::StatusOr<std::vector<StepLocator::Occurrence>> StepLocator::Occurrences(
    const SampleId& id, uint64_t passes) {
  const auto& datasets = source_->datasets();
  if (id.dataset >= datasets.size() || id.shard >= datasets[id.dataset]->NumShards() ||
      id.index >= datasets[id.dataset]->ShardSamples(id.shard)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sample ", id.dataset, "/", id.shard, "/", id.index, " is not one of the datasets (",
        datasets.size(), " datasets; check the dataset, shard and document numbers)"));
  }
  const LaneOptions& o = resolved_.lanes;
  std::vector<Occurrence> out;
  // A group replayed once: two passes' draws of the sample in one group (a group across
  // a pass boundary) are both found by the first replay.
  std::set<std::pair<uint32_t, uint64_t>> replayed;
  for (uint64_t pass = 0; pass < passes; ++pass) {
    const uint64_t draw = source_->DrawOfSample(id, pass);
    const std::optional<uint64_t> chunk = source_->ChunkOfDraw(id.dataset, draw);
    if (!chunk.has_value()) break;  // the stream ends before this pass draws it
    const uint32_t lane = LaneOfChunk(*chunk, o.num_lanes, o.routing, o.routing_seed);
    // Every block of C global chunks gives each lane one: the lane's chunk index.
    const uint64_t group = (*chunk / o.num_lanes) / o.flush_every_k_chunks;
    if (!replayed.insert({lane, group}).second) continue;
    RETURN_IF_ERROR(CountGroupsThrough(lane, group));
    const LaneTotals& t = totals_[lane];
    const uint64_t i = group - t.first_group;
    if (i + 1 >= t.before.size()) continue;  // not counted: the lane ended before it
    const uint64_t first = t.before[i], end = t.before[i + 1];
    if (first == end) continue;  // a group without records (a wrap tail dropped whole)
    const uint64_t m = o.microbatch_size;
    ASSIGN_OR_RETURN(std::unique_ptr<LaneStream> stream, StreamAt(lane, first / m));
    for (uint64_t b = first / m; stream != nullptr && b <= (end - 1) / m; ++b) {
      ASSIGN_OR_RETURN(std::optional<BatchPlan> plan, stream->NextPlan());
      if (!plan.has_value()) break;
      Occurrence found{pass, *chunk, lane, plan->lane_batch_index, {}};
      const std::vector<uint32_t> rows = SegmentRows(*plan);
      for (size_t s = 0; s < plan->segments.size(); ++s) {
        const Segment& seg = plan->segments[s];
        const uint32_t row = rows[s];
        // Only this group's records: a batch shared with a neighbouring group may hold
        // the sample's draw of another pass there, found when that group is replayed.
        const uint64_t record = plan->lane_batch_index * m + row;
        if (!seg.padding && seg.id == id && record >= first && record < end) {
          found.pieces.emplace_back(row, seg);
        }
      }
      if (!found.pieces.empty()) out.push_back(std::move(found));
    }
  }
  return out;
}

absl::StatusOr<std::vector<StepLocator::StepBatch>> StepLocator::Step(uint64_t step,
                                                                      uint64_t global_batches,
                                                                      uint32_t dp_degree) {
  const uint32_t c = num_lanes();
  ASSIGN_OR_RETURN(const uint64_t per_lane, BatchesPerLane(global_batches));
  global_batches = per_lane * c;
  RETURN_IF_ERROR(CheckDpDegreeFitsLanes(dp_degree, c));
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
            batches / per_lane == 0 ? std::string("(none)")
                                    : absl::StrCat(batches / per_lane - 1)));
      }
      out.push_back(StepBatch{d, static_cast<uint32_t>(i), *std::move(plan)});
    }
  }
  return out;
}

absl::StatusOr<uint64_t> StepLocator::BatchesPerLane(uint64_t global_batches) const {
  const uint32_t c = num_lanes();
  if (global_batches == 0) global_batches = c;
  if (global_batches % c != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global_batches ", global_batches, " must be a multiple of canonical_replicas ", c,
        ": a step takes the same number of batches from every lane"));
  }
  return global_batches / c;
}

absl::StatusOr<StepLocator::StepPlace> StepLocator::PlaceOf(uint32_t lane, uint64_t lane_batch,
                                                            uint64_t global_batches,
                                                            uint32_t dp_degree) const {
  const uint32_t c = num_lanes();
  if (lane >= c) {
    return absl::InvalidArgumentError(
        absl::StrCat("lane ", lane, " must be < canonical_replicas ", c));
  }
  ASSIGN_OR_RETURN(const uint64_t per_lane, BatchesPerLane(global_batches));
  RETURN_IF_ERROR(CheckDpDegreeFitsLanes(dp_degree, c));
  for (uint32_t d = 0; d < dp_degree; ++d) {
    ASSIGN_OR_RETURN(std::vector<uint32_t> lanes,
                     OwnedLanes(c, dp_degree, d, resolved_.spec.mapping_strategy()));
    const auto at = std::find(lanes.begin(), lanes.end(), lane);
    if (at == lanes.end()) continue;
    // As in Step(): the group's t-th batch is lane lanes[t mod |L|]'s batch t / |L|.
    const uint64_t t = lane_batch * lanes.size() + static_cast<uint64_t>(at - lanes.begin());
    const uint64_t in_step = per_lane * lanes.size();
    return StepPlace{t / in_step, d, static_cast<uint32_t>(t % in_step)};
  }
  return absl::InternalError(absl::StrCat("no DP group of ", dp_degree, " owns lane ", lane));
}

}  // namespace zephon::pipeline
