// Record batches: a chain without a packer (LaneOptions::records) yields every sample
// of a lane, whole and in order, one per row; restarts and materialization agree.
#include "daemon/pipeline/batching/record_batch.h"

#include <gtest/gtest.h>

#include <map>

#include "daemon/pipeline/batching/lane_stream.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/spec.h"

namespace zephon::pipeline {
namespace {

using testing::MakeMemoryDataset;
using testing::MakeSyntheticDataset;

// A records chain: [shuffle] batch(microbatch, drop_last), no packer.
proto::PipelineSpec RecordSpec(uint64_t chunk_size, uint32_t flush_every, uint64_t microbatch,
                               bool drop_last, uint64_t shuffle = 0, uint32_t lanes = 1) {
  proto::PipelineSpec spec = testing::SpecOverDatasets({"docs"});
  spec.mutable_work_source()->set_chunk_size(chunk_size);
  spec.set_canonical_replicas(lanes);
  spec.set_lane_routing(proto::PipelineSpec::MODULO);
  spec.set_flush_every_k_chunks(flush_every);
  if (shuffle > 0) {
    auto* sh = spec.add_operators()->mutable_shuffle();
    sh->set_buffer_size(shuffle);
    sh->set_seed(3);
  }
  auto* b = spec.add_operators()->mutable_batch();
  b->set_microbatch_size(microbatch);
  b->set_drop_last(drop_last);
  return ResolveSpec(spec, 1).value();
}

std::shared_ptr<const WorkSource> Source(const proto::PipelineSpec& spec,
                                         std::shared_ptr<const Dataset> ds) {
  return std::shared_ptr<const WorkSource>(WorkSource::Create(spec.work_source(), {ds}).value());
}

std::vector<Batch> Drain(const proto::PipelineSpec& spec, std::shared_ptr<const Dataset> ds,
                         uint32_t lane = 0, LanePosition start = {}, uint64_t first = 0) {
  auto stream =
      LaneStream::Create(Source(spec, ds), LaneOptions::FromSpec(spec).value(), lane, start,
                         first)
          .value();
  std::vector<Batch> out;
  while (auto b = stream->Next().value()) out.push_back(*b);
  return out;
}

TEST(RecordBatchTest, EveryChunkSampleIsOneWholeRecordInChunkOrder) {
  // Lengths 3, 5, 0, 2, 4: the empty document is an empty record, not dropped.
  auto ds = MakeMemoryDataset(
      "docs", {{{10, 11, 12}, {20, 21, 22, 23, 24}, {}, {30, 31}, {40, 41, 42, 43}}});
  const auto spec = RecordSpec(/*chunk=*/2, /*flush=*/1, /*micro=*/2, /*drop_last=*/false);
  const LaneOptions options = LaneOptions::FromSpec(spec).value();
  EXPECT_TRUE(options.records);
  EXPECT_NE(options.Describe().find("records -> batch(2"), std::string::npos)
      << options.Describe();
  const std::vector<Batch> batches = Drain(spec, ds);
  auto source = Source(spec, ds);
  std::vector<SampleId> want;
  std::vector<int64_t> want_chunks;
  std::vector<SampleId> chunk;
  for (uint64_t g = 0; g < source->NumChunks().value(); ++g) {
    source->Chunk(g, &chunk);
    for (const SampleId& id : chunk) {
      want.push_back(id);
      want_chunks.push_back(static_cast<int64_t>(g));
    }
  }
  std::vector<SampleId> got;
  std::vector<int64_t> got_chunks;
  for (const Batch& b : batches) {
    ASSERT_TRUE(b.records);
    ASSERT_EQ(b.record_offsets.size(), b.rows + 1u);
    ASSERT_EQ(b.sample_ids.size(), b.rows);
    ASSERT_EQ(b.chunk_ids.size(), b.rows);
    EXPECT_EQ(b.record_offsets.back(), static_cast<int64_t>(b.tokens.size()));
    for (uint32_t r = 0; r < b.rows; ++r) {
      const SampleId& id = b.sample_ids[r];
      std::vector<int32_t> tokens;
      ASSERT_TRUE(ds->AppendTokens(id.shard, id.index, 0, ds->SampleLength(id.shard, id.index),
                                   &tokens)
                      .ok());
      EXPECT_EQ(std::vector<int32_t>(b.tokens.begin() + b.record_offsets[r],
                                     b.tokens.begin() + b.record_offsets[r + 1]),
                tokens)
          << "row " << r;
      got.push_back(id);
    }
    got_chunks.insert(got_chunks.end(), b.chunk_ids.begin(), b.chunk_ids.end());
    EXPECT_TRUE(b.positions.empty() && b.valid_tokens.empty());
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(got_chunks, want_chunks);
}

TEST(RecordBatchTest, RestartingAtEveryBatchEndReproducesTheRest) {
  auto ds = MakeSyntheticDataset("docs", 1, 3, 30, 9);
  for (uint64_t shuffle : {uint64_t{0}, uint64_t{7}}) {
    const auto spec = RecordSpec(5, 2, 3, /*drop_last=*/false, shuffle, /*lanes=*/2);
    for (uint32_t lane : {0u, 1u}) {
      const std::vector<Batch> all = Drain(spec, ds, lane);
      ASSERT_GT(all.size(), 3u);
      for (size_t k = 1; k < all.size(); ++k) {
        const std::vector<Batch> rest = Drain(spec, ds, lane, all[k - 1].end, k);
        ASSERT_EQ(rest.size(), all.size() - k) << "lane " << lane << " k " << k;
        for (size_t j = 0; j < rest.size(); ++j) {
          EXPECT_EQ(rest[j].tokens, all[k + j].tokens);
          EXPECT_EQ(rest[j].sample_ids, all[k + j].sample_ids);
          EXPECT_EQ(rest[j].chunk_ids, all[k + j].chunk_ids);
        }
      }
    }
  }
}

TEST(RecordBatchTest, ARepeatedSampleKeepsOneRowEach) {
  auto ds = MakeMemoryDataset("docs", {{{1, 2}, {3}}});
  auto spec = RecordSpec(1, 4, 8, false);
  spec.mutable_work_source()->set_stop_after_passes(3);
  spec = ResolveSpec(spec, 1).value();
  const std::vector<Batch> batches = Drain(spec, ds);
  ASSERT_EQ(batches.size(), 1u);
  EXPECT_EQ(batches[0].rows, 6u);
  std::map<uint64_t, int> seen;
  for (const SampleId& id : batches[0].sample_ids) ++seen[id.index];
  EXPECT_EQ(seen[0], 3);
  EXPECT_EQ(seen[1], 3);
  EXPECT_EQ(batches[0].tokens.size(), 9u);
}

TEST(RecordBatchTest, LongestRecordBoundsEveryRow) {
  auto ds = MakeMemoryDataset("docs", {{{1, 2, 3}, {4}}, {{5, 6, 7, 8, 9}}});
  const RecordBounds bounds = LongestRecord({ds}, /*payload=*/false);
  EXPECT_EQ(bounds.tokens, 5u);
  EXPECT_EQ(bounds.payload_bytes, 0u);
}

TEST(RecordBatchTest, TextIsRefusedWithAPackerAndWithoutTextDatasets) {
  // keep_payload asks the records for their source record: a token dataset keeps none.
  BatchPlan plan;
  plan.records = true;
  plan.payload = true;
  plan.rows = 1;
  auto ds = MakeMemoryDataset("docs", {{{1, 2}}});
  plan.segments.push_back(Segment{SampleId{0, 0, 0}, 0, 2, false});
  plan.sample_ids.push_back(SampleId{0, 0, 0});
  plan.chunk_ids.push_back(0);
  auto batch = MaterializeRecords(plan, {ds});
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(batch.status().message().find("'docs' keeps no payloads"), std::string::npos);

  proto::PipelineSpec packed = testing::SpecOverDatasets({"docs"});
  packed.mutable_work_source()->set_chunk_size(2);
  auto* t = packed.add_operators()->mutable_tokenize();
  t->set_tokenizer_path("/unused/tokenizer.json");
  t->set_keep_payload(true);
  packed.add_operators()->mutable_pack_flat()->set_max_length(8);
  packed.add_operators()->mutable_batch()->set_microbatch_size(2);
  packed.set_canonical_replicas(1);
  packed.set_flush_every_k_chunks(1);
  packed.set_lane_routing(proto::PipelineSpec::MODULO);
  auto options = LaneOptions::FromSpec(packed);
  ASSERT_FALSE(options.ok());
  EXPECT_NE(options.status().message().find("keep_payload"), std::string::npos);
  EXPECT_NE(options.status().message().find("operators[1]"), std::string::npos);
}

}  // namespace
}  // namespace zephon::pipeline
