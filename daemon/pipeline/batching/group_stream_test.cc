#include "daemon/pipeline/spec_string_form.h"
#include "daemon/pipeline/batching/group_stream.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <set>
#include <tuple>

#include "daemon/pipeline/ordering/lanes.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/formats/testing_corpus.h"

namespace zephon::pipeline {
namespace {

using testing::MakeSyntheticDataset;

std::vector<std::shared_ptr<const Dataset>> Corpus() {
  return {MakeSyntheticDataset("web", 1, 3, 37, 13), MakeSyntheticDataset("code", 2, 2, 23, 29)};
}

proto::PipelineSpec ElasticSpec(uint32_t lanes, const std::string& mapping) {
  proto::PipelineSpec spec = pipeline::testing::SpecOverDatasets({"web", "code"});
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
  spec.add_operators()->mutable_pack_flat()->set_max_length(9);
  auto* batch = spec.add_operators()->mutable_batch();
  batch->set_microbatch_size(2);
  batch->set_drop_last(true);
  spec.set_canonical_replicas(lanes);
  spec.set_mapping_strategy(ParseMappingStrategy(mapping).value());
  spec.set_flush_every_k_chunks(2);
  return ResolveSpec(spec, 1).value();
}

std::unique_ptr<GroupStream> Group(const proto::PipelineSpec& spec, uint32_t dp_degree,
                                   uint32_t d) {
  auto lanes = OwnedLanes(spec.canonical_replicas(), dp_degree, d,
                          spec.mapping_strategy());
  auto g = GroupStream::Create(ResolvePipeline(spec, 1).value(), Corpus(), lanes.value());
  EXPECT_TRUE(g.ok()) << g.status();
  return *std::move(g);
}

using Key = std::tuple<uint32_t, uint64_t, std::vector<int32_t>>;

// Steps of C batches in total (C/D from each group). Stops at the first step that is
// not one batch from every lane: the guarantee covers steps while all lanes produce
// (a lane's length does not depend on D, so that prefix has the same length for all D).
std::vector<std::multiset<Key>> Steps(const proto::PipelineSpec& spec, uint32_t dp_degree) {
  const uint32_t c = spec.canonical_replicas();
  std::vector<std::unique_ptr<GroupStream>> groups;
  for (uint32_t d = 0; d < dp_degree; ++d) groups.push_back(Group(spec, dp_degree, d));
  std::vector<std::multiset<Key>> steps;
  while (true) {
    std::multiset<Key> step;
    for (auto& g : groups) {
      for (uint32_t i = 0; i < c / dp_degree; ++i) {
        auto b = g->Next().value();
        if (!b) return steps;
        step.insert(Key{b->lane, b->lane_batch_index, b->tokens});
      }
    }
    std::set<uint32_t> lanes_in_step;
    for (const Key& k : step) lanes_in_step.insert(std::get<0>(k));
    if (lanes_in_step.size() != c) return steps;
    steps.push_back(step);
  }
}

TEST(GroupStreamTest, EveryDivisorOfCSeesTheSameBatchesPerStep) {
  for (uint32_t c : {4u, 6u}) {
    for (const char* mapping : {"contiguous", "interleaved"}) {
      const auto spec = ElasticSpec(c, mapping);
      const auto reference = Steps(spec, 1);
      ASSERT_GE(reference.size(), 3u) << "corpus too small to test anything";
      for (uint32_t d = 2; d <= c; ++d) {
        if (c % d != 0) continue;
        const auto steps = Steps(spec, d);
        ASSERT_EQ(steps.size(), reference.size()) << "C=" << c << " D=" << d;
        for (size_t s = 0; s < steps.size(); ++s) {
          ASSERT_TRUE(steps[s] == reference[s])
              << "C=" << c << " D=" << d << " " << mapping << " step " << s;
        }
      }
    }
  }
}

TEST(GroupStreamTest, RoundRobinsOwnedLanesAndSkipsExhaustedOnes) {
  auto spec = ElasticSpec(4, "contiguous");
  auto group = Group(spec, 2, 1);  // Lanes 2, 3.
  EXPECT_EQ(group->owned_lanes(), (std::vector<uint32_t>{2, 3}));
  std::map<uint32_t, uint64_t> next_index;
  std::vector<uint32_t> order;
  while (auto b = group->Next().value()) {
    EXPECT_EQ(b->lane_batch_index, next_index[b->lane]++) << "lane " << b->lane;
    order.push_back(b->lane);
  }
  ASSERT_GE(order.size(), 4u);
  // Strict alternation while both lanes last; then only the longer lane remains.
  size_t i = 0;
  while (i + 1 < order.size() && order[i] == 2 && order[i + 1] == 3) i += 2;
  for (size_t j = i + 1; j < order.size(); ++j) EXPECT_EQ(order[j], order[i]);
  EXPECT_FALSE(group->Next().value().has_value());
  EXPECT_NE(group->Explain().find("lanes: 2,3 of 4"), std::string::npos) << group->Explain();
}

proto::LaneProgress Progress(uint32_t lane, uint64_t next, uint64_t chunk, uint64_t records) {
  proto::LaneProgress p;
  p.set_lane(lane);
  p.set_next_batch_index(next);
  p.set_flush_group_chunk(chunk);
  p.set_records_into_group(records);
  return p;
}

using ProgressKey = std::tuple<uint32_t, uint64_t, uint64_t, uint64_t>;

std::vector<ProgressKey> Keys(const std::vector<proto::LaneProgress>& progress) {
  std::vector<ProgressKey> out;
  for (const auto& p : progress) {
    out.emplace_back(p.lane(), p.next_batch_index(), p.flush_group_chunk(),
                     p.records_into_group());
  }
  return out;
}

TEST(GroupStreamTest, ACancelFlagStopsPlanningWithCancelled) {
  auto spec = ElasticSpec(4, "contiguous");
  auto group = Group(spec, 1, 0);
  std::atomic<bool> cancelled{false};
  group->set_cancel_flag(&cancelled);
  ASSERT_TRUE(group->NextPlan().ok());
  cancelled.store(true);
  EXPECT_TRUE(absl::IsCancelled(group->NextPlan().status()));
  EXPECT_TRUE(absl::IsCancelled(group->Next().status()));
}

TEST(GroupStreamTest, ProgressStartsAtZeroAndFollowsTheReturnedBatches) {
  auto group = Group(ElasticSpec(4, "contiguous"), 2, 1);  // Lanes 2, 3.
  EXPECT_EQ(Keys(group->Progress()),
            (std::vector<ProgressKey>{{2, 0, 0, 0}, {3, 0, 0, 0}}));
  std::map<uint32_t, ProgressKey> expected = {{2, {2, 0, 0, 0}}, {3, {3, 0, 0, 0}}};
  while (auto b = group->Next().value()) {
    expected[b->lane] = {b->lane, b->lane_batch_index + 1, b->end.flush_group_chunk,
                         b->end.records_into_group};
    EXPECT_EQ(Keys(group->Progress()),
              (std::vector<ProgressKey>{expected[2], expected[3]}));
  }
}

// Same topology: restored from the progress after any number of batches, the stream
// continues with exactly the batches (and order) the original had, to the very end.
TEST(GroupStreamTest, RestoringAfterAnyBatchContinuesExactly) {
  for (uint32_t c : {4u, 6u}) {
    const auto spec = ElasticSpec(c, "interleaved");
    for (uint32_t d = 0; d < 2; ++d) {
      auto original = Group(spec, 2, d);
      std::vector<Batch> all;
      std::vector<std::vector<proto::LaneProgress>> after = {original->Progress()};
      while (auto b = original->Next().value()) {
        all.push_back(*b);
        after.push_back(original->Progress());
      }
      ASSERT_GT(all.size(), 6u);
      for (size_t n = 0; n <= all.size(); ++n) {
        auto restored = GroupStream::Create(ResolvePipeline(spec, 1).value(), Corpus(), original->owned_lanes(), &after[n]);
        ASSERT_TRUE(restored.ok()) << restored.status();
        EXPECT_EQ(Keys((*restored)->Progress()), Keys(after[n])) << n;
        for (size_t k = n; k < all.size(); ++k) {
          auto b = (*restored)->Next().value();
          ASSERT_TRUE(b.has_value()) << "C=" << c << " group " << d << " restored at " << n;
          EXPECT_EQ(b->lane, all[k].lane) << "restored at " << n << ", batch " << k;
          EXPECT_EQ(b->lane_batch_index, all[k].lane_batch_index) << n << ", " << k;
          EXPECT_EQ(b->tokens, all[k].tokens) << n << ", " << k;
          EXPECT_EQ(b->sample_ids, all[k].sample_ids) << n << ", " << k;
        }
        EXPECT_FALSE((*restored)->Next().value().has_value()) << "restored at " << n;
      }
    }
  }
}

// Another topology: the least-progressed lane goes first, ties by lane id.
TEST(GroupStreamTest, RestoredOrderIsLeastProgressFirst) {
  const auto spec = ElasticSpec(4, "contiguous");
  auto reference = Group(spec, 1, 0);
  std::map<std::pair<uint32_t, uint64_t>, Batch> by_key;
  for (int i = 0; i < 12; ++i) {
    auto b = reference->Next().value();
    ASSERT_TRUE(b.has_value());
    by_key[{b->lane, b->lane_batch_index}] = *b;
  }
  // An uneven checkpoint (e.g. mid-step on another topology): lanes 0..3 at batches
  // 3, 1, 2, 1, each restored at the end of its previous batch.
  const uint64_t next[4] = {3, 1, 2, 1};
  std::vector<proto::LaneProgress> restore;
  for (uint32_t lane = 0; lane < 4; ++lane) {
    const LanePosition end = by_key.at({lane, next[lane] - 1}).end;
    restore.push_back(Progress(lane, next[lane], end.flush_group_chunk, end.records_into_group));
  }
  auto g = GroupStream::Create(ResolvePipeline(spec, 1).value(), Corpus(), {0, 1, 2, 3}, &restore).value();
  const std::vector<std::pair<uint32_t, uint64_t>> kOrder = {
      {1, 1}, {3, 1}, {1, 2}, {2, 2}, {3, 2}, {0, 3}, {1, 3}, {2, 3}};
  for (const auto& [lane, index] : kOrder) {
    auto b = g->Next().value();
    ASSERT_TRUE(b.has_value());
    EXPECT_EQ(std::make_pair(b->lane, b->lane_batch_index), std::make_pair(lane, index));
    if (by_key.count({lane, index})) EXPECT_EQ(b->tokens, by_key.at({lane, index}).tokens);
  }
}

TEST(GroupStreamTest, RestoreNeedsExactlyOneEntryPerOwnedLane) {
  const auto spec = ElasticSpec(4, "contiguous");
  std::vector<proto::LaneProgress> restore = {Progress(0, 0, 0, 0), Progress(1, 0, 0, 0),
                                              Progress(3, 0, 0, 0)};
  auto g = GroupStream::Create(ResolvePipeline(spec, 1).value(), Corpus(), {2, 3}, &restore);
  ASSERT_FALSE(g.ok());
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("owned lane 2"), std::string::npos) << g.status();
  // Other lanes' entries are ignored.
  EXPECT_TRUE(GroupStream::Create(ResolvePipeline(spec, 1).value(), Corpus(), {0, 1}, &restore).ok());
  restore.push_back(Progress(1, 2, 0, 0));
  g = GroupStream::Create(ResolvePipeline(spec, 1).value(), Corpus(), {0, 1}, &restore);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("lane 1"), std::string::npos) << g.status();
  restore = {Progress(0, 0, 0, 0), Progress(4, 0, 0, 0)};
  g = GroupStream::Create(ResolvePipeline(spec, 1).value(), Corpus(), {0}, &restore);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("lane 4"), std::string::npos) << g.status();
  restore = {Progress(0, 0, 1, 0)};  // flush_every_k_chunks is 2.
  g = GroupStream::Create(ResolvePipeline(spec, 1).value(), Corpus(), {0}, &restore);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("lane 0"), std::string::npos) << g.status();
}

// Golden ids: the first 8 sample ids of a fixed spec. Changing them (any change to
// the mixer, permutation, schedule, routing or operators) requires bumping
// PipelineSpec.format_version / kFormatVersion.
TEST(GroupStreamTest, GoldenFirstSampleIds) {
  auto group = Group(ElasticSpec(4, "contiguous"), 1, 0);
  std::vector<SampleId> ids;
  while (ids.size() < 8) {
    auto b = group->Next().value();
    ASSERT_TRUE(b.has_value());
    ids.insert(ids.end(), b->sample_ids.begin(), b->sample_ids.end());
  }
  ids.resize(8);
  const std::vector<SampleId> kGolden = {{1, 0, 7}, {0, 2, 26}, {1, 0, 6},  {1, 0, 8},
                                         {0, 2, 16}, {1, 0, 5}, {1, 0, 7}, {1, 0, 13}};
  EXPECT_EQ(ids, kGolden) << ::testing::PrintToString(ids);
}

}  // namespace
}  // namespace zephon::pipeline
