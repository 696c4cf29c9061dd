#include "daemon/pipeline/provenance/step_locator.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>
#include <string>
#include <vector>

#include "daemon/pipeline/batching/group_stream.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/ordering/lanes.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/spec_string_form.h"

namespace zephon::pipeline {
namespace {

using testing::MakeSyntheticDataset;

std::vector<std::shared_ptr<const Dataset>> Corpus() {
  return {MakeSyntheticDataset("web", 1, 3, 37, 13), MakeSyntheticDataset("code", 2, 2, 23, 29)};
}

// Four lanes over two datasets, two passes, a shuffle before packing; `chain` adds the
// packing and batch operators.
proto::PipelineSpec Spec(const std::function<void(proto::PipelineSpec*)>& chain,
                         const std::string& mapping = "contiguous") {
  proto::PipelineSpec spec = testing::SpecOverDatasets({"web", "code"});
  auto* ws = spec.mutable_work_source();
  ws->add_weights(0.6);
  ws->add_weights(0.4);
  ws->set_seed(1234);
  ws->set_chunk_size(5);
  ws->set_shuffle_shards(true);
  ws->set_shuffle_within_shard(true);
  ws->set_exhausted_policy(proto::WorkSourceSpec::STOP_AFTER_PASSES);
  ws->set_stop_after_passes(2);
  auto* shuffle = spec.add_operators()->mutable_shuffle();
  shuffle->set_buffer_size(4);
  shuffle->set_seed(77);
  chain(&spec);
  spec.set_canonical_replicas(4);
  spec.set_mapping_strategy(ParseMappingStrategy(mapping).value());
  spec.set_flush_every_k_chunks(2);
  return ResolveSpec(spec, 1).value();
}

void Wrap(proto::PipelineSpec* spec) {
  spec->add_operators()->mutable_pack_flat()->set_max_length(9);
  spec->add_operators()->mutable_batch()->set_microbatch_size(2);
}

void FirstFitThenRowShuffle(proto::PipelineSpec* spec) {
  auto* pack = spec->add_operators()->mutable_pack_flat();
  pack->set_max_length(16);
  pack->set_algorithm("first_fit");
  pack->set_pad_token_id(0);
  pack->set_num_bins(3);
  auto* rows = spec->add_operators()->mutable_shuffle();
  rows->set_buffer_size(3);
  rows->set_seed(5);
  spec->add_operators()->mutable_batch()->set_microbatch_size(3);
}

void Records(proto::PipelineSpec* spec) {
  auto* batch = spec->add_operators()->mutable_batch();
  batch->set_microbatch_size(3);
  batch->set_drop_last(true);
}

// Each DP group's plans, in the order its ranks receive them, until the first group ends.
std::vector<std::vector<BatchPlan>> Delivered(const proto::PipelineSpec& spec, uint32_t d_of) {
  std::vector<std::vector<BatchPlan>> out;
  for (uint32_t d = 0; d < d_of; ++d) {
    auto lanes = OwnedLanes(spec.canonical_replicas(), d_of, d, spec.mapping_strategy());
    auto g = GroupStream::Create(ResolvePipeline(spec, 1).value(), Corpus(), lanes.value());
    EXPECT_TRUE(g.ok()) << g.status();
    out.emplace_back();
    while (true) {
      auto plan = (*g)->NextPlan();
      EXPECT_TRUE(plan.ok()) << plan.status();
      if (!plan.ok() || !plan->has_value()) break;
      out.back().push_back(**plan);
    }
  }
  return out;
}

void ExpectSamePlan(const BatchPlan& want, const BatchPlan& got, const std::string& where) {
  EXPECT_EQ(got.lane, want.lane) << where;
  EXPECT_EQ(got.lane_batch_index, want.lane_batch_index) << where;
  EXPECT_EQ(got.rows, want.rows) << where;
  EXPECT_EQ(got.segments, want.segments) << where;
  EXPECT_EQ(got.sample_ids, want.sample_ids) << where;
}

// Every step the groups deliver while all lanes produce, asked in a scrambled order
// (late steps first, so counting and lookups below the counted range both run).
void ExpectStepsMatchTheGroups(const proto::PipelineSpec& spec, uint32_t dp_degree,
                               uint64_t global_batches, int threads) {
  const uint32_t c = spec.canonical_replicas();
  const std::vector<std::vector<BatchPlan>> groups = Delivered(spec, dp_degree);
  auto locator = StepLocator::Create(ResolvePipeline(spec, 1).value(), Corpus(), threads);
  ASSERT_TRUE(locator.ok()) << locator.status();
  // Full steps: each group has (global_batches / c) * |L_d| batches per step.
  uint64_t steps = UINT64_MAX;
  for (uint32_t d = 0; d < dp_degree; ++d) {
    const uint64_t lanes = OwnedLanes(c, dp_degree, d, spec.mapping_strategy())->size();
    steps = std::min<uint64_t>(steps, groups[d].size() / (global_batches / c * lanes));
  }
  ASSERT_GE(steps, 3u) << "the corpus should give a few steps";
  // Stop before the first step where some lane has ended (the round robin skips it).
  std::vector<uint64_t> order;
  for (uint64_t n = steps; n-- > 0;) order.push_back((n * 7) % steps);
  uint64_t checked = 0;
  for (uint64_t n : order) {
    auto step = (*locator)->Step(n, global_batches, dp_degree);
    if (!step.ok()) {
      EXPECT_EQ(step.status().code(), absl::StatusCode::kOutOfRange) << step.status();
      continue;
    }
    std::vector<uint64_t> seen(dp_degree, 0);
    for (const StepLocator::StepBatch& b : *step) {
      const uint64_t lanes = OwnedLanes(c, dp_degree, b.dp_group, spec.mapping_strategy())->size();
      const uint64_t t = n * (global_batches / c * lanes) + b.batch_in_step;
      ASSERT_LT(t, groups[b.dp_group].size());
      ExpectSamePlan(groups[b.dp_group][t], b.plan,
                     "step " + std::to_string(n) + " group " + std::to_string(b.dp_group) +
                         " batch " + std::to_string(b.batch_in_step));
      EXPECT_EQ(b.batch_in_step, seen[b.dp_group]++);
      // And the inverse: the lane batch is placed where Step() put it.
      auto place = (*locator)->PlaceOf(b.plan.lane, b.plan.lane_batch_index, global_batches,
                                       dp_degree);
      ASSERT_TRUE(place.ok()) << place.status();
      EXPECT_EQ(place->step, n);
      EXPECT_EQ(place->dp_group, b.dp_group);
      EXPECT_EQ(place->batch_in_step, b.batch_in_step);
    }
    EXPECT_EQ(step->size(), global_batches);
    ++checked;
  }
  EXPECT_GE(checked, 3u);
}

TEST(StepLocatorTest, StepsAreWhatEachDpGroupDeliversWithWrap) {
  for (uint32_t d : {1u, 2u, 4u}) ExpectStepsMatchTheGroups(Spec(Wrap), d, 4, 1);
}

TEST(StepLocatorTest, StepsOfSeveralBatchesPerLaneInterleavedMappingAndThreads) {
  for (uint32_t d : {1u, 2u}) ExpectStepsMatchTheGroups(Spec(Wrap, "interleaved"), d, 8, 3);
}

TEST(StepLocatorTest, StepsMatchWithFirstFitPaddingAndAShuffleOfRows) {
  for (uint32_t d : {1u, 4u}) ExpectStepsMatchTheGroups(Spec(FirstFitThenRowShuffle), d, 4, 2);
}

TEST(StepLocatorTest, StepsMatchForRecordBatches) {
  for (uint32_t d : {1u, 2u}) ExpectStepsMatchTheGroups(Spec(Records), d, 4, 1);
}

TEST(StepLocatorTest, ACheckpointsPositionsAnchorTheCountsExactly) {
  for (auto chain : {Wrap, FirstFitThenRowShuffle}) {
    const proto::PipelineSpec spec = Spec(chain);
    const std::vector<std::vector<BatchPlan>> delivered = Delivered(spec, 1);
    ASSERT_GE(delivered[0].size(), 36u);  // steps 0-8
    // A checkpoint after 5 steps of 4 batches: each lane's progress then.
    auto g = GroupStream::Create(ResolvePipeline(spec, 1).value(), Corpus(), {0, 1, 2, 3});
    ASSERT_TRUE(g.ok()) << g.status();
    for (int i = 0; i < 20; ++i) ASSERT_TRUE((*g)->NextPlan().ok());
    const std::vector<proto::LaneProgress> progress = (*g)->Progress();
    auto locator = StepLocator::Create(ResolvePipeline(spec, 1).value(), Corpus());
    ASSERT_TRUE(locator.ok()) << locator.status();
    ASSERT_TRUE((*locator)->Anchor(progress).ok());
    // At and after the anchor, then before it (counted from the start again).
    for (uint64_t n : {5u, 7u, 6u, 2u, 0u, 8u}) {
      if ((n + 1) * 4 > delivered[0].size()) continue;
      auto step = (*locator)->Step(n, 4, 1);
      ASSERT_TRUE(step.ok()) << step.status();
      for (const StepLocator::StepBatch& b : *step) {
        ExpectSamePlan(delivered[0][n * 4 + b.batch_in_step], b.plan,
                       "anchored step " + std::to_string(n));
      }
    }
    // A position no run of this spec has: more records into its group than the lane's
    // batches before it hold.
    std::vector<proto::LaneProgress> bad = progress;
    bad[0].set_records_into_group(bad[0].next_batch_index() * 100 + 1);
    EXPECT_EQ((*locator)->Anchor(bad).code(), absl::StatusCode::kInvalidArgument);
  }
}

// Every sample's deliveries, found by inverting the engine, are the ones the stream
// made: the same lane batches, rows and token ranges.
void ExpectOccurrencesMatchTheStream(const proto::PipelineSpec& spec) {
  const std::vector<BatchPlan> plans = Delivered(spec, 1)[0];
  std::map<std::tuple<uint32_t, uint32_t, uint64_t>,
           std::vector<std::tuple<uint32_t, uint64_t, uint32_t, uint64_t, uint64_t>>>
      truth;
  for (const BatchPlan& plan : plans) {
    uint64_t filled = 0;
    for (size_t s = 0; s < plan.segments.size(); ++s) {
      const Segment& seg = plan.segments[s];
      const uint32_t row = plan.cols == 0 ? static_cast<uint32_t>(s)
                                          : static_cast<uint32_t>(filled / plan.cols);
      filled += seg.count;
      if (seg.padding) continue;
      truth[{seg.id.dataset, seg.id.shard, seg.id.index}].emplace_back(
          plan.lane, plan.lane_batch_index, row, seg.offset, seg.count);
    }
  }
  auto locator = StepLocator::Create(ResolvePipeline(spec, 1).value(), Corpus(), 2);
  ASSERT_TRUE(locator.ok()) << locator.status();
  const std::vector<std::shared_ptr<const Dataset>> corpus = Corpus();
  uint64_t checked = 0;
  for (uint32_t d = 0; d < corpus.size(); ++d) {
    for (uint32_t sh = 0; sh < corpus[d]->NumShards(); ++sh) {
      for (uint64_t i = 0; i < corpus[d]->ShardSamples(sh); ++i) {
        auto found = (*locator)->Occurrences(SampleId{d, sh, i}, 10);
        ASSERT_TRUE(found.ok()) << found.status();
        std::vector<std::tuple<uint32_t, uint64_t, uint32_t, uint64_t, uint64_t>> got;
        for (const StepLocator::Occurrence& o : *found) {
          for (const auto& [row, seg] : o.pieces) {
            got.emplace_back(o.lane, o.lane_batch, row, seg.offset, seg.count);
          }
        }
        std::sort(got.begin(), got.end());
        auto want = truth[{d, sh, i}];
        std::sort(want.begin(), want.end());
        EXPECT_EQ(got, want) << "sample " << d << "/" << sh << "/" << i;
        checked += want.size();
      }
    }
  }
  EXPECT_GT(checked, 50u);
}

TEST(StepLocatorTest, EverySamplesDeliveriesAreFoundByInvertingTheEngine) {
  ExpectOccurrencesMatchTheStream(Spec(Wrap));
  ExpectOccurrencesMatchTheStream(Spec(FirstFitThenRowShuffle, "interleaved"));
  ExpectOccurrencesMatchTheStream(Spec(Records));
}

TEST(StepLocatorTest, AnUnknownSampleIsRefused) {
  auto locator = StepLocator::Create(ResolvePipeline(Spec(Wrap), 1).value(), Corpus());
  ASSERT_TRUE(locator.ok());
  EXPECT_EQ((*locator)->Occurrences(SampleId{0, 0, 999}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*locator)->Occurrences(SampleId{5, 0, 0}, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StepLocatorTest, AnAnchorAtEveryBatchGivesTheSameAnswers) {
  // What an audit log holds: each batch's lane, index and start position.
  for (auto chain : {Wrap, FirstFitThenRowShuffle, Records}) {
    const proto::PipelineSpec spec = Spec(chain);
    const std::vector<BatchPlan> delivered = Delivered(spec, 1)[0];
    auto locator = StepLocator::Create(ResolvePipeline(spec, 1).value(), Corpus());
    ASSERT_TRUE(locator.ok()) << locator.status();
    for (const BatchPlan& p : delivered) {
      ASSERT_TRUE((*locator)->AddAnchor(p.lane, p.lane_batch_index, p.start).ok());
    }
    const uint64_t steps = delivered.size() / 4;
    for (uint64_t n = steps; n-- > 0;) {
      auto step = (*locator)->Step(n, 4, 1);
      if (!step.ok()) continue;  // past a lane's end
      for (const StepLocator::StepBatch& b : *step) {
        ExpectSamePlan(delivered[n * 4 + b.batch_in_step], b.plan,
                       "anchored everywhere, step " + std::to_string(n));
      }
    }
    EXPECT_EQ((*locator)->AddAnchor(0, 0, LanePosition{1, 0}).code(),
              absl::StatusCode::kInvalidArgument);  // not a flush-group start
  }
}

TEST(StepLocatorTest, CountedGroupStartsAreTheDeliveredBatchesStartsAndAnchorAnother) {
  // What `zephonctl which` leaves in the cache for the next query.
  for (auto chain : {Wrap, FirstFitThenRowShuffle, Records}) {
    const proto::PipelineSpec spec = Spec(chain);
    const std::vector<BatchPlan> delivered = Delivered(spec, 1)[0];
    // (lane, group chunk) -> the lane record the group starts at, from the daemon's plans.
    std::map<std::pair<uint32_t, uint64_t>, uint64_t> group_starts;
    const uint64_t m = ResolvePipeline(spec, 1).value().lanes.microbatch_size;
    for (const BatchPlan& p : delivered) {
      group_starts[{p.lane, p.start.flush_group_chunk}] =
          p.lane_batch_index * m - p.start.records_into_group;
    }
    auto counter = StepLocator::Create(ResolvePipeline(spec, 1).value(), Corpus());
    ASSERT_TRUE(counter.ok()) << counter.status();
    const uint64_t steps = delivered.size() / 4;
    for (uint64_t n = steps; n-- > 0;) {  // the last step before a lane ended
      if ((*counter)->Step(n, 4, 1).ok()) break;
    }
    auto fresh = StepLocator::Create(ResolvePipeline(spec, 1).value(), Corpus());
    ASSERT_TRUE(fresh.ok()) << fresh.status();
    uint64_t visited = 0, compared = 0;
    (*counter)->ForEachCountedGroupStart(
        [&](uint32_t lane, uint64_t batch, const LanePosition& at) {
          // A batch starting right at a group boundary is planned at the end of the
          // group before: such a group has no plan starting in it to compare with.
          auto it = group_starts.find({lane, at.flush_group_chunk});
          if (it != group_starts.end()) {
            EXPECT_EQ(it->second, batch * m - at.records_into_group) << lane << "/" << batch;
            ++compared;
          }
          EXPECT_TRUE((*fresh)->AddAnchor(lane, batch, at).ok());
          ++visited;
        });
    EXPECT_GE(compared, 4u);
    EXPECT_GE(visited, compared);
    for (uint64_t n = steps; n-- > 0;) {
      auto step = (*fresh)->Step(n, 4, 1);
      if (!step.ok()) continue;  // past a lane's end
      for (const StepLocator::StepBatch& b : *step) {
        ExpectSamePlan(delivered[n * 4 + b.batch_in_step], b.plan,
                       "anchored at counted group starts, step " + std::to_string(n));
      }
    }
  }
}

TEST(StepLocatorTest, PastALanesEndIsNulloptAndAStepThereIsOutOfRange) {
  auto locator = StepLocator::Create(ResolvePipeline(Spec(Wrap), 1).value(), Corpus());
  ASSERT_TRUE(locator.ok()) << locator.status();
  auto far = (*locator)->LaneBatch(0, 1'000'000);
  ASSERT_TRUE(far.ok()) << far.status();
  EXPECT_FALSE(far->has_value());
  auto step = (*locator)->Step(1'000'000, 4, 2);
  EXPECT_EQ(step.status().code(), absl::StatusCode::kOutOfRange) << step.status();
  EXPECT_NE(step.status().message().find("past the end of lane"), std::string::npos)
      << step.status();
}

TEST(StepLocatorTest, BadStepShapesAreRefused) {
  auto locator = StepLocator::Create(ResolvePipeline(Spec(Wrap), 1).value(), Corpus());
  ASSERT_TRUE(locator.ok()) << locator.status();
  EXPECT_EQ((*locator)->Step(0, 6, 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*locator)->Step(0, 4, 5).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ((*locator)->LaneBatch(4, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zephon::pipeline
