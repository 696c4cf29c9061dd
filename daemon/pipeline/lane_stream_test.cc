#include "daemon/pipeline/lane_stream.h"

#include <gtest/gtest.h>

#include "daemon/pipeline/testing_corpus.h"

namespace zephon::pipeline {
namespace {

using testing::MakeMemoryDataset;
using testing::MakeSyntheticDataset;

// Documents of lengths 3, 5, 0, 2, 4 with recognisable tokens.
std::shared_ptr<const Dataset> FiveDocs() {
  return MakeMemoryDataset(
      "docs", {{{10, 11, 12}, {20, 21, 22, 23, 24}, {}, {30, 31}, {40, 41, 42, 43}}});
}

proto::PipelineSpec LaneSpec(uint64_t chunk_size, uint32_t flush_every, uint64_t max_length,
                             uint64_t microbatch, bool drop_last) {
  proto::PipelineSpec spec;
  auto* ws = spec.mutable_work_source();
  auto* d = ws->add_datasets();
  d->set_name("docs");
  d->set_path("/unused");
  ws->set_chunk_size(chunk_size);
  spec.set_canonical_replicas(1);
  spec.set_routing("modulo");
  spec.set_flush_every_chunks(flush_every);
  spec.add_operators()->mutable_pack_flat()->set_max_length(max_length);
  auto* b = spec.add_operators()->mutable_batch();
  b->set_microbatch_size(microbatch);
  b->set_drop_last(drop_last);
  return spec;
}

std::unique_ptr<LaneStream> MakeLane(const proto::PipelineSpec& spec,
                                     std::vector<std::shared_ptr<const Dataset>> ds,
                                     uint32_t lane = 0, LanePosition start = {},
                                     uint64_t first = 0) {
  std::shared_ptr<const WorkSource> ws(WorkSource::Create(spec.work_source(), ds).value());
  return LaneStream::Create(ws, LaneOptions::FromSpec(spec).value(), lane, start, first).value();
}

TEST(LaneStreamTest, PackFlatWrapsDocumentsIntoExactRecords) {
  auto lane = MakeLane(LaneSpec(5, 1, 4, 2, /*drop_last=*/false), {FiveDocs()});
  auto b0 = lane->Next().value();
  ASSERT_TRUE(b0.has_value());
  EXPECT_EQ(b0->rows, 2u);
  EXPECT_EQ(b0->cols, 4u);
  EXPECT_EQ(b0->tokens, (std::vector<int32_t>{10, 11, 12, 20, 21, 22, 23, 24}));
  EXPECT_EQ(b0->positions, (std::vector<int32_t>{0, 1, 2, 0, 0, 1, 2, 3}));
  EXPECT_EQ(b0->sample_ids, (std::vector<SampleId>{{0, 0, 0}, {0, 0, 1}}));
  auto b1 = lane->Next().value();
  ASSERT_TRUE(b1.has_value());  // drop_last=false: the short batch is emitted.
  EXPECT_EQ(b1->rows, 1u);
  EXPECT_EQ(b1->lane_batch_index, 1u);
  EXPECT_EQ(b1->tokens, (std::vector<int32_t>{30, 31, 40, 41}));
  EXPECT_EQ(b1->positions, (std::vector<int32_t>{0, 1, 0, 1}));
  EXPECT_EQ(b1->sample_ids, (std::vector<SampleId>{{0, 0, 3}, {0, 0, 4}}));
  EXPECT_FALSE(lane->Next().value().has_value());
  EXPECT_FALSE(lane->Next().value().has_value());
  EXPECT_EQ(lane->dropped_tokens(), 2u);  // 42, 43 at the lane end.
}

TEST(LaneStreamTest, DropLastDropsTheShortFinalBatch) {
  auto lane = MakeLane(LaneSpec(5, 1, 4, 2, /*drop_last=*/true), {FiveDocs()});
  EXPECT_TRUE(lane->Next().value().has_value());
  EXPECT_FALSE(lane->Next().value().has_value());
}

TEST(LaneStreamTest, LeftoversAreDroppedAtEveryFlushGroupEnd) {
  // One document per chunk, flush every 2 chunks: groups {d0,d1} (8 tokens),
  // {d2,d3} (2 tokens, all dropped), {d4} (4 tokens). Batches span groups.
  auto lane = MakeLane(LaneSpec(1, 2, 4, 3, false), {FiveDocs()});
  auto b = lane->Next().value();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->rows, 3u);
  EXPECT_EQ(b->tokens, (std::vector<int32_t>{10, 11, 12, 20, 21, 22, 23, 24, 40, 41, 42, 43}));
  EXPECT_EQ(b->positions, (std::vector<int32_t>{0, 1, 2, 0, 0, 1, 2, 3, 0, 1, 2, 3}));
  EXPECT_EQ(lane->dropped_tokens(), 2u);
  EXPECT_FALSE(lane->Next().value().has_value());
}

TEST(LaneStreamTest, SampleIdsAreDeduplicatedWithinABatch) {
  // A document longer than a record spans rows but is listed once.
  auto lane = MakeLane(LaneSpec(5, 1, 2, 2, true), {FiveDocs()});
  auto b = lane->Next().value();
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->tokens, (std::vector<int32_t>{10, 11, 12, 20}));
  EXPECT_EQ(b->sample_ids, (std::vector<SampleId>{{0, 0, 0}, {0, 0, 1}}));
  b = lane->Next().value();
  EXPECT_EQ(b->sample_ids, (std::vector<SampleId>{{0, 0, 1}}));
}

proto::PipelineSpec ShuffledSpec() {
  proto::PipelineSpec spec = LaneSpec(8, 3, 16, 2, true);
  spec.set_canonical_replicas(3);
  spec.set_routing("permute");
  spec.mutable_work_source()->set_shuffle_within_shard(true);
  spec.mutable_work_source()->set_shuffle_shards(true);
  proto::OperatorSpec shuffle;
  shuffle.mutable_shuffle()->set_buffer_size(5);
  shuffle.mutable_shuffle()->set_seed(9);
  spec.mutable_operators()->Add()->CopyFrom(spec.operators(1));
  spec.mutable_operators(1)->CopyFrom(spec.operators(0));
  spec.mutable_operators(0)->CopyFrom(shuffle);
  return spec;
}

TEST(LaneStreamTest, RestartingAtARecordedPositionReproducesTheStream) {
  const auto spec = ShuffledSpec();
  auto ds = MakeSyntheticDataset("docs", 1, 3, 40, 11);
  auto lane = MakeLane(spec, {ds}, 2);
  std::vector<Batch> all;
  while (auto b = lane->Next().value()) all.push_back(*b);
  ASSERT_GT(all.size(), 4u);
  for (size_t k : {size_t{1}, size_t{3}, all.size() - 1}) {
    auto resumed = MakeLane(spec, {ds}, 2, all[k].start, k);
    auto b = resumed->Next().value();
    ASSERT_TRUE(b.has_value()) << k;
    EXPECT_EQ(b->lane_batch_index, k);
    EXPECT_EQ(b->tokens, all[k].tokens) << "batch " << k;
    EXPECT_EQ(b->sample_ids, all[k].sample_ids) << "batch " << k;
  }
}

TEST(LaneStreamTest, ShuffleChangesOrderButKeepsTheSamples) {
  auto spec = ShuffledSpec();
  auto ds = MakeSyntheticDataset("docs", 1, 3, 40, 11);
  auto plain_spec = spec;
  plain_spec.mutable_operators()->DeleteSubrange(0, 1);
  std::vector<SampleId> order_a, order_b;
  auto lane = MakeLane(spec, {ds}, 0);
  while (auto x = lane->Next().value()) order_a.insert(order_a.end(), x->sample_ids.begin(), x->sample_ids.end());
  auto plain = MakeLane(plain_spec, {ds}, 0);
  while (auto x = plain->Next().value()) order_b.insert(order_b.end(), x->sample_ids.begin(), x->sample_ids.end());
  EXPECT_NE(order_a, order_b);
}

TEST(LaneOptionsTest, OperatorListIsValidatedWithClearErrors) {
  auto spec = LaneSpec(5, 1, 4, 2, true);
  EXPECT_TRUE(LaneOptions::FromSpec(spec).ok());
  auto bad = spec;
  bad.mutable_operators(0)->mutable_pack_flat()->set_max_length(1);
  auto s = LaneOptions::FromSpec(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("max_length"), std::string::npos);
  bad = spec;
  bad.mutable_operators(1)->mutable_batch()->set_microbatch_size(0);
  EXPECT_FALSE(LaneOptions::FromSpec(bad).ok());
  bad = spec;
  bad.mutable_operators()->SwapElements(0, 1);
  s = LaneOptions::FromSpec(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("operators[0]"), std::string::npos);
  bad = spec;
  bad.mutable_operators(0)->mutable_pack_flat()->set_algorithm("greedy");
  EXPECT_FALSE(LaneOptions::FromSpec(bad).ok());
  bad = spec;
  bad.add_operators()->mutable_shuffle()->set_buffer_size(3);
  EXPECT_FALSE(LaneOptions::FromSpec(bad).ok());
}

}  // namespace
}  // namespace zephon::pipeline
