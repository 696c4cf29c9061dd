#include "daemon/pipeline/group_stream.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>

#include "daemon/pipeline/lanes.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/testing_corpus.h"

namespace zephon::pipeline {
namespace {

using testing::MakeSyntheticDataset;

std::vector<std::shared_ptr<const Dataset>> Corpus() {
  return {MakeSyntheticDataset("web", 1, 3, 37, 13), MakeSyntheticDataset("code", 2, 2, 23, 29)};
}

proto::PipelineSpec ElasticSpec(uint32_t lanes, const std::string& mapping) {
  proto::PipelineSpec spec;
  auto* ws = spec.mutable_work_source();
  for (const char* name : {"web", "code"}) {
    auto* d = ws->add_datasets();
    d->set_name(name);
    d->set_path(std::string("/unused/") + name);
    d->set_format("megatron");
  }
  ws->add_weights(0.6);
  ws->add_weights(0.4);
  ws->set_seed(1234);
  ws->set_chunk_size(5);
  ws->set_shuffle_shards(true);
  ws->set_shuffle_within_shard(true);
  ws->set_exhausted_policy("stop_after_passes");
  ws->set_stop_after_passes(2);
  auto* shuffle = spec.add_operators()->mutable_shuffle();
  shuffle->set_buffer_size(4);
  shuffle->set_seed(77);
  spec.add_operators()->mutable_pack_flat()->set_max_length(9);
  auto* batch = spec.add_operators()->mutable_batch();
  batch->set_microbatch_size(2);
  batch->set_drop_last(true);
  spec.set_canonical_replicas(lanes);
  spec.set_mapping(mapping);
  spec.set_flush_every_chunks(2);
  return ResolveSpec(spec, 1).value();
}

std::unique_ptr<GroupStream> Group(const proto::PipelineSpec& spec, uint32_t dp_degree,
                                   uint32_t d) {
  auto lanes = OwnedLanes(spec.canonical_replicas(), dp_degree, d,
                          ParseMapping(spec.mapping()).value());
  auto g = GroupStream::Create(spec, Corpus(), lanes.value());
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
