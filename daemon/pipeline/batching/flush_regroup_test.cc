// RegroupLaneStarts: every record position of every lane under flush_every_k_chunks=k
// is either carried to k' (then the records taken before it under k and the records
// from the regrouped position under k' hold every token of the lane exactly once) or
// refused naming the lane and the field (mid-group, or a boundary k' lacks).
#include "daemon/pipeline/batching/flush_regroup.h"

#include <gtest/gtest.h>

#include <map>

#include "absl/strings/str_cat.h"
#include "daemon/pipeline/batching/group_stream.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/ordering/lanes.h"
#include "daemon/pipeline/spec.h"

namespace zephon::pipeline {
namespace {

using TokensBySample = std::map<SampleId, uint64_t>;

std::vector<std::shared_ptr<const Dataset>> Corpus() {
  return {testing::MakeSyntheticDataset("web", 1, 3, 30, 13),
          testing::MakeSyntheticDataset("code", 2, 2, 20, 21)};
}

// best_fit with oversized samples split: nothing is dropped, so every token of the
// lane's chunks lands in exactly one record under any grouping.
ResolvedPipeline Spec(uint32_t flush_every_k, uint64_t microbatch = 1) {
  proto::PipelineSpec spec = testing::SpecOverDatasets({"web", "code"});
  auto* ws = spec.mutable_work_source();
  ws->set_seed(99);
  ws->set_chunk_size(3);
  ws->set_shuffle_within_shard(true);
  auto* shuffle = spec.add_operators()->mutable_shuffle();
  shuffle->set_buffer_size(4);
  shuffle->set_seed(5);
  auto* pack = spec.add_operators()->mutable_pack_flat();
  pack->set_max_length(16);
  pack->set_algorithm("best_fit");
  pack->set_pad_token_id(0);
  pack->set_num_bins(2);
  pack->set_drop_oversized(false);
  auto* batch = spec.add_operators()->mutable_batch();
  batch->set_microbatch_size(microbatch);
  batch->set_drop_last(false);
  spec.set_canonical_replicas(3);
  spec.set_flush_every_k_chunks(flush_every_k);
  return ResolvePipeline(spec, 1).value();
}

std::shared_ptr<const WorkSource> Source(const ResolvedPipeline& p) {
  return std::shared_ptr<const WorkSource>(
      WorkSource::Create(p.spec.work_source(), Corpus()).value());
}

void AddTokens(const BatchPlan& plan, TokensBySample* out) {
  for (const Segment& s : plan.segments) {
    if (!s.padding) (*out)[s.id] += s.count;
  }
}

// Every record of `lane` from `start`, one per plan, with the position after each.
std::vector<std::pair<BatchPlan, LanePosition>> Records(const ResolvedPipeline& p,
                                                        uint32_t lane, LanePosition start) {
  auto stream = LaneStream::Create(Source(p), p.lanes, lane, start).value();
  std::vector<std::pair<BatchPlan, LanePosition>> out;
  while (auto plan = stream->NextPlan().value()) out.emplace_back(*plan, plan->end);
  return out;
}

proto::LaneProgress Progress(uint32_t lane, LanePosition at, uint64_t batch) {
  proto::LaneProgress p;
  p.set_lane(lane);
  p.set_next_batch_index(batch);
  p.set_flush_group_chunk(at.flush_group_chunk);
  p.set_records_into_group(at.records_into_group);
  return p;
}

TEST(FlushRegroupTest, EveryPositionIsCarriedWithoutLossOrRefusedNamingTheLane) {
  constexpr uint64_t kOld = 2;
  const ResolvedPipeline old = Spec(kOld);
  for (uint64_t k : {1u, 4u, 3u}) {
    const ResolvedPipeline now = Spec(k);
    int carried = 0, refused = 0;
    for (uint32_t lane = 0; lane < 3; ++lane) {
      const auto records = Records(old, lane, {});
      ASSERT_GT(records.size(), 8u);
      TokensBySample all;
      for (const auto& r : records) AddTokens(r.first, &all);
      TokensBySample before;
      for (size_t n = 0; n <= records.size(); ++n) {
        const LanePosition at = n == 0 ? LanePosition{} : records[n - 1].second;
        if (n > 0) AddTokens(records[n - 1].first, &before);
        const std::string label = absl::StrCat("k'=", k, " lane ", lane, " after ", n,
                                               " records {", at.flush_group_chunk, ", ",
                                               at.records_into_group, "}");
        auto regrouped = RegroupLaneStarts(Source(now), now.lanes, kOld,
                                           {Progress(lane, at, n)});
        if (!regrouped.ok()) {
          ++refused;
          EXPECT_EQ(regrouped.status().code(), absl::StatusCode::kFailedPrecondition) << label;
          EXPECT_NE(regrouped.status().message().find(absl::StrCat("lane ", lane)),
                    std::string::npos) << label << ": " << regrouped.status();
          EXPECT_NE(regrouped.status().message().find("flush_every_k_chunks changed from 2 to"),
                    std::string::npos) << label << ": " << regrouped.status();
          // Only positions strictly inside a group or on a boundary k' lacks.
          const bool mid_group = at.records_into_group > 0 && n < records.size() &&
                                 records[n].second.flush_group_chunk == at.flush_group_chunk;
          const uint64_t boundary =
              at.records_into_group == 0 ? at.flush_group_chunk : at.flush_group_chunk + kOld;
          EXPECT_TRUE(mid_group || boundary % k != 0) << label << ": " << regrouped.status();
          continue;
        }
        ++carried;
        const proto::LaneProgress& p = (*regrouped)[0];
        EXPECT_EQ(p.next_batch_index(), n) << label;
        EXPECT_EQ(p.records_into_group(), 0u) << label;
        EXPECT_EQ(p.flush_group_chunk() % k, 0u) << label;
        TokensBySample total = before;
        for (const auto& r :
             Records(now, lane, {p.flush_group_chunk(), p.records_into_group()})) {
          AddTokens(r.first, &total);
        }
        EXPECT_EQ(total, all) << label << " -> {" << p.flush_group_chunk() << ", 0}";
      }
    }
    EXPECT_GT(carried, 3) << "k'=" << k;
    EXPECT_GT(refused, 3) << "k'=" << k;
  }
}

TEST(FlushRegroupTest, TheSameValueChangesNothing) {
  const ResolvedPipeline p = Spec(2);
  const auto records = Records(p, 1, {});
  const LanePosition mid = records[2].second;
  auto same = RegroupLaneStarts(Source(p), p.lanes, 2, {Progress(1, mid, 3)});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ((*same)[0].flush_group_chunk(), mid.flush_group_chunk);
  EXPECT_EQ((*same)[0].records_into_group(), mid.records_into_group);
}

// Through GroupStream::Create, as a restore does: a lane at its end stays ended under
// any new value; a mid-group position is refused with the message.
TEST(FlushRegroupTest, GroupStreamRegroupsRestoredLanes) {
  const ResolvedPipeline old = Spec(2, 3);
  auto run = GroupStream::Create(old, Corpus(), {0, 1, 2}).value();
  while (run->Next().value().has_value()) {
  }
  const std::vector<proto::LaneProgress> at_end = run->Progress();
  for (uint64_t k : {1u, 3u, 5u}) {
    auto resumed = GroupStream::Create(Spec(k, 3), Corpus(), {0, 1, 2}, &at_end, 2);
    ASSERT_TRUE(resumed.ok()) << "k'=" << k << ": " << resumed.status();
    EXPECT_FALSE((*resumed)->Next().value().has_value()) << "k'=" << k;
  }
  std::vector<proto::LaneProgress> mid;
  for (uint32_t lane = 0; lane < 3; ++lane) {
    mid.push_back(Progress(lane, Records(Spec(2), lane, {})[0].second, 1));
  }
  auto refused = GroupStream::Create(Spec(4, 3), Corpus(), {0, 1, 2}, &mid, 2);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("lane 0 stands 1 records into its flush group"),
            std::string::npos) << refused.status();
}

}  // namespace
}  // namespace zephon::pipeline
