#include "daemon/pipeline/batching/lane_stream.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/spec.h"

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
  spec.set_lane_routing(proto::PipelineSpec::MODULO);
  spec.set_flush_every_k_chunks(flush_every);
  spec.add_operators()->mutable_pack_flat()->set_max_length(max_length);
  auto* b = spec.add_operators()->mutable_batch();
  b->set_microbatch_size(microbatch);
  b->set_drop_last(drop_last);
  return ResolveSpec(spec, 1).value();  // LaneOptions and WorkSource take resolved specs
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
  spec.set_lane_routing(proto::PipelineSpec::PERMUTE);
  spec.mutable_work_source()->set_shuffle_within_shard(true);
  spec.mutable_work_source()->set_shuffle_shards(true);
  proto::OperatorSpec shuffle;
  shuffle.mutable_shuffle()->set_buffer_size(5);
  shuffle.mutable_shuffle()->set_seed(9);
  spec.mutable_operators()->Add()->CopyFrom(spec.operators(1));
  spec.mutable_operators(1)->CopyFrom(spec.operators(0));
  spec.mutable_operators(0)->CopyFrom(shuffle);
  return ResolveSpec(spec, 1).value();
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

void ExpectSameBatch(const Batch& got, const Batch& want, const std::string& where) {
  EXPECT_EQ(got.lane, want.lane) << where;
  EXPECT_EQ(got.lane_batch_index, want.lane_batch_index) << where;
  EXPECT_EQ(got.rows, want.rows) << where;
  EXPECT_EQ(got.tokens, want.tokens) << where;
  EXPECT_EQ(got.positions, want.positions) << where;
  EXPECT_EQ(got.sample_ids, want.sample_ids) << where;
  EXPECT_TRUE(got.start == want.start) << where;
  EXPECT_TRUE(got.end == want.end) << where;
}

// Every batch boundary of every lane, for several packings: the lane restarted at the
// `end` of batch k-1 (k = 0: the beginning) with first_batch_index k reproduces batches
// k, k+1, ... exactly, and restarting at the end of the last batch yields nothing.
TEST(LaneStreamTest, RestartingAtEveryBatchEndReproducesTheRestOfTheLane) {
  auto ds = MakeSyntheticDataset("docs", 1, 3, 40, 11);
  struct Shape {
    uint64_t chunk_size, flush_every, max_length, microbatch;
    bool drop_last, shuffle;
  };
  const Shape kShapes[] = {{8, 3, 16, 2, true, true},  {4, 1, 7, 3, false, true},
                           {3, 2, 5, 4, false, true},  {5, 2, 9, 1, true, false},
                           {6, 4, 13, 3, true, true}};
  size_t spanning = 0, boundaries = 0;
  for (const Shape& shape : kShapes) {
    proto::PipelineSpec spec = ShuffledSpec();
    spec.mutable_work_source()->set_chunk_size(shape.chunk_size);
    spec.set_flush_every_k_chunks(shape.flush_every);
    if (shape.shuffle) {
      spec.mutable_operators(1)->mutable_pack_flat()->set_max_length(shape.max_length);
      spec.mutable_operators(2)->mutable_batch()->set_microbatch_size(shape.microbatch);
      spec.mutable_operators(2)->mutable_batch()->set_drop_last(shape.drop_last);
    } else {
      spec.mutable_operators()->DeleteSubrange(0, 1);
      spec.mutable_operators(0)->mutable_pack_flat()->set_max_length(shape.max_length);
      spec.mutable_operators(1)->mutable_batch()->set_microbatch_size(shape.microbatch);
      spec.mutable_operators(1)->mutable_batch()->set_drop_last(shape.drop_last);
    }
    for (uint32_t l = 0; l < spec.canonical_replicas(); ++l) {
      auto lane = MakeLane(spec, {ds}, l);
      std::vector<Batch> all;
      while (auto b = lane->Next().value()) all.push_back(*b);
      ASSERT_GT(all.size(), 2u) << spec.ShortDebugString();
      for (const Batch& b : all) {
        if (b.end.flush_group_chunk != b.start.flush_group_chunk && b.end.records_into_group > 0) {
          ++spanning;
        }
      }
      for (size_t k = 0; k <= all.size(); ++k) {
        const LanePosition from = k == 0 ? LanePosition{} : all[k - 1].end;
        auto resumed = MakeLane(spec, {ds}, l, from, k);
        const std::string where = absl::StrCat("lane ", l, " restarted before batch ", k, " of ",
                                               all.size(), "; ", spec.ShortDebugString());
        EXPECT_TRUE(resumed->position() == from) << where;
        EXPECT_EQ(resumed->next_batch_index(), k) << where;
        for (size_t j = k; j < all.size(); ++j) {
          auto b = resumed->Next().value();
          ASSERT_TRUE(b.has_value()) << where << ": batch " << j;
          ExpectSameBatch(*b, all[j], absl::StrCat(where, ": batch ", j));
        }
        EXPECT_FALSE(resumed->Next().value().has_value()) << where;
        ++boundaries;
      }
    }
  }
  EXPECT_GT(spanning, 5u) << "no batch spans flush groups: the test covers too little";
  EXPECT_GT(boundaries, 100u);
}

TEST(LaneStreamTest, PositionsThatAreNotOfTheLaneAreRejectedNamingTheLane) {
  const auto spec = ShuffledSpec();  // flush_every_k_chunks 3.
  auto ds = MakeSyntheticDataset("docs", 1, 3, 40, 11);
  std::shared_ptr<const WorkSource> ws(WorkSource::Create(spec.work_source(), {ds}).value());
  const LaneOptions options = LaneOptions::FromSpec(spec).value();
  auto s = LaneStream::Create(ws, options, 1, LanePosition{2, 0});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("lane 1"), std::string::npos) << s.status();
  s = LaneStream::Create(ws, options, 1, LanePosition{0, 100000});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("lane 1"), std::string::npos) << s.status();
  // Far past the lane's end with no records to skip: a valid (exhausted) position.
  auto end = LaneStream::Create(ws, options, 1, LanePosition{3000, 0}, 7);
  ASSERT_TRUE(end.ok()) << end.status();
  EXPECT_FALSE((*end)->Next().value().has_value());
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
  bad.mutable_operators()->SwapElements(0, 1);  // batch, then pack_flat after it
  s = LaneOptions::FromSpec(bad);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("operators[1]"), std::string::npos) << s.status();
  EXPECT_NE(s.status().message().find("follow batch"), std::string::npos) << s.status();
  bad = spec;
  bad.mutable_operators(0)->mutable_pack_flat()->set_algorithm("greedy");
  EXPECT_FALSE(LaneOptions::FromSpec(bad).ok());
  bad = spec;
  bad.add_operators()->mutable_shuffle()->set_buffer_size(3);
  EXPECT_FALSE(LaneOptions::FromSpec(bad).ok());
}

// Wrap as it was before the other algorithms (a reference model, written from the
// contract): per flush group, the samples' tokens as one stream, cut into max_length
// records, the tail dropped; positions restart at every piece of a sample in a record.
// The lane's batches must hold exactly these cells, in order.
TEST(LaneStreamTest, WrapMatchesTheStreamCutReferenceModel) {
  for (uint64_t max_length : {2u, 7u, 16u}) {
    for (uint32_t flush_every : {1u, 3u}) {
      auto spec = LaneSpec(4, flush_every, max_length, 3, /*drop_last=*/false);
      auto ds = MakeSyntheticDataset("docs", 1, 3, 20, 19);
      spec.mutable_work_source()->set_stop_after_passes(2);
      std::shared_ptr<const WorkSource> ws(WorkSource::Create(spec.work_source(), {ds}).value());
      std::vector<int32_t> tokens, positions;
      std::vector<SampleId> chunk;
      const uint64_t chunks = ws->NumChunks().value();
      for (uint64_t g0 = 0; g0 < chunks; g0 += flush_every) {
        std::vector<int32_t> stream, pos;
        for (uint64_t g = g0; g < std::min(chunks, g0 + flush_every); ++g) {
          ws->Chunk(g, &chunk);
          for (const SampleId& id : chunk) {
            const uint64_t n = ds->SampleLength(id.shard, id.index);
            std::vector<int32_t> t(n);
            ASSERT_TRUE(ds->CopyTokens(id.shard, id.index, 0, n, t.data()).ok());
            for (uint64_t i = 0; i < n; ++i) {
              // A piece starts at the sample's start or at a record's start.
              const bool starts = i == 0 || stream.size() % max_length == 0;
              pos.push_back(starts ? 0 : pos.back() + 1);
              stream.push_back(t[i]);
            }
          }
        }
        const size_t kept = stream.size() / max_length * max_length;
        tokens.insert(tokens.end(), stream.begin(), stream.begin() + kept);
        positions.insert(positions.end(), pos.begin(), pos.begin() + kept);
      }
      auto lane = MakeLane(spec, {ds});
      std::vector<int32_t> got_tokens, got_positions;
      while (auto b = lane->Next().value()) {
        got_tokens.insert(got_tokens.end(), b->tokens.begin(), b->tokens.end());
        got_positions.insert(got_positions.end(), b->positions.begin(), b->positions.end());
      }
      ASSERT_FALSE(tokens.empty());
      EXPECT_EQ(got_tokens, tokens) << "max_length " << max_length << " flush " << flush_every;
      EXPECT_EQ(got_positions, positions) << "max_length " << max_length;
    }
  }
}

proto::PipelineSpec BestFitSpec(uint64_t max_length, uint32_t num_bins) {
  auto spec = LaneSpec(5, 1, max_length, 2, /*drop_last=*/false);
  auto* pack = spec.mutable_operators(0)->mutable_pack_flat();
  pack->set_algorithm("best_fit");
  pack->set_num_bins(num_bins);
  pack->set_pad_token_id(99);
  return ResolveSpec(spec, 1).value();
}

TEST(LaneStreamTest, BestFitPadsRowsAndCountsValidTokens) {
  // Lengths 3, 5, 0, 2, 4 into 2 bins of 6: 3 -> A, 5 -> B, 2 -> A (B has 1 left),
  // 4 fits neither: A (5 tokens) goes out padded, 4 opens C; the flush emits B, C.
  auto lane = MakeLane(BestFitSpec(6, 2), {FiveDocs()});
  auto b0 = lane->Next().value();
  ASSERT_TRUE(b0.has_value());
  EXPECT_EQ(b0->tokens,
            (std::vector<int32_t>{10, 11, 12, 30, 31, 99, 20, 21, 22, 23, 24, 99}));
  // The padding is one more segment: its positions start at 0.
  EXPECT_EQ(b0->positions, (std::vector<int32_t>{0, 1, 2, 0, 1, 0, 0, 1, 2, 3, 4, 0}));
  EXPECT_EQ(b0->valid_tokens, (std::vector<int32_t>{5, 5}));
  EXPECT_EQ(b0->sample_ids, (std::vector<SampleId>{{0, 0, 0}, {0, 0, 3}, {0, 0, 1}}));
  auto b1 = lane->Next().value();
  ASSERT_TRUE(b1.has_value());
  EXPECT_EQ(b1->tokens, (std::vector<int32_t>{40, 41, 42, 43, 99, 99}));
  EXPECT_EQ(b1->positions, (std::vector<int32_t>{0, 1, 2, 3, 0, 1}));
  EXPECT_EQ(b1->valid_tokens, (std::vector<int32_t>{4}));
  EXPECT_FALSE(lane->Next().value().has_value());
  const PackFigures f = lane->stats()->Snapshot(0);
  EXPECT_EQ(f.records, 3u);
  EXPECT_EQ(f.tokens, 14u);
  EXPECT_EQ(f.padding_cells, 4u);
  EXPECT_EQ(f.dropped_tokens, 0u);
}

// BestFitSpec's packing as pack_sequences (resolved: no positions, pad_token_id kept).
proto::PipelineSpec BestFitSequencesSpec(uint64_t max_length, uint32_t num_bins) {
  auto spec = LaneSpec(5, 1, max_length, 2, /*drop_last=*/false);
  proto::PackFlatSpec pack = spec.operators(0).pack_flat();
  pack.clear_emit_positions();
  pack.set_algorithm("best_fit");
  pack.set_num_bins(num_bins);
  *spec.mutable_operators(0)->mutable_pack_sequences() = pack;
  return ResolveSpec(spec, 1).value();
}

TEST(LaneStreamTest, PackSequencesIsPackFlatsRecordsWithTheirSegmentLengths) {
  const auto spec = BestFitSequencesSpec(6, 2);
  const proto::PackFlatSpec& resolved = spec.operators(0).pack_sequences();
  EXPECT_FALSE(resolved.emit_positions());  // the segments carry the boundaries
  EXPECT_TRUE(resolved.has_pad_token_id());
  EXPECT_EQ(resolved.pad_token_id(), 0);  // optional for pack_sequences
  const LaneOptions options = LaneOptions::FromSpec(spec).value();
  EXPECT_TRUE(options.segments);
  EXPECT_NE(options.Describe().find("pack_sequences(max_length=6, best_fit"),
            std::string::npos)
      << options.Describe();
  auto lane = MakeLane(spec, {FiveDocs()});
  auto b0 = lane->Next().value();
  ASSERT_TRUE(b0.has_value());
  // BestFitPadsRowsAndCountsValidTokens' records (pad 0 instead of 99).
  EXPECT_EQ(b0->tokens, (std::vector<int32_t>{10, 11, 12, 30, 31, 0, 20, 21, 22, 23, 24, 0}));
  EXPECT_EQ(b0->segments.width, 2u);
  EXPECT_EQ(b0->segments.lengths, (std::vector<int32_t>{3, 2, 5, 0}));
  auto b1 = lane->Next().value();
  ASSERT_TRUE(b1.has_value());
  EXPECT_EQ(b1->segments.width, 1u);
  EXPECT_EQ(b1->segments.lengths, (std::vector<int32_t>{4}));
  // The plan path (materialized into a slot) carries the flag the slot writer reads.
  auto again = MakeLane(spec, {FiveDocs()});
  EXPECT_TRUE(again->NextPlan().value()->segment_lengths);
  // pack_flat batches carry none.
  auto flat = MakeLane(BestFitSpec(6, 2), {FiveDocs()});
  EXPECT_EQ(flat->Next().value()->segments.width, 0u);
}

TEST(LaneOptionsTest, PackSequencesErrorsNameIt) {
  auto spec = BestFitSequencesSpec(6, 2);
  spec.mutable_operators(0)->mutable_pack_sequences()->set_num_bins(0);
  auto s = LaneOptions::FromSpec(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("operators[0] pack_sequences.num_bins must be in"),
            std::string::npos)
      << s.status();
  // A second packer where batch belongs.
  auto twice = BestFitSequencesSpec(6, 2);
  *twice.mutable_operators()->Add() = twice.operators(1);
  *twice.mutable_operators(1)->mutable_pack_flat() = twice.operators(0).pack_sequences();
  s = LaneOptions::FromSpec(twice);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("operators[1]: expected batch"), std::string::npos)
      << s.status();
}

TEST(LaneStreamTest, WrapRowsAreAllValid) {
  auto lane = MakeLane(LaneSpec(5, 1, 4, 2, false), {FiveDocs()});
  auto b0 = lane->Next().value();
  ASSERT_TRUE(b0.has_value());
  EXPECT_EQ(b0->valid_tokens, (std::vector<int32_t>{4, 4}));
  EXPECT_EQ(lane->stats()->Snapshot(0).padding_cells, 0u);
}

TEST(LaneStreamTest, OversizedSamplesAreDroppedAndCounted) {
  // max_length 4: the 5-token document is dropped (drop_oversized resolves to true).
  auto lane = MakeLane(BestFitSpec(4, 2), {FiveDocs()});
  std::vector<SampleId> seen;
  while (auto b = lane->Next().value()) {
    seen.insert(seen.end(), b->sample_ids.begin(), b->sample_ids.end());
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), SampleId{0, 0, 1}), 0);
  EXPECT_EQ(lane->stats()->Snapshot(0).dropped_samples, 1u);
  EXPECT_EQ(lane->dropped_tokens(), 5u);
}

TEST(LaneOptionsTest, PackingOptionsAreValidatedNamingTheOperator) {
  auto expect_error = [](const proto::PipelineSpec& spec, const std::string& needle) {
    auto s = LaneOptions::FromSpec(spec);
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find("operators[0] pack_flat"), std::string::npos)
        << s.status();
    EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status();
  };
  const auto good = BestFitSpec(6, 2);
  EXPECT_TRUE(LaneOptions::FromSpec(good).ok());
  auto bad = good;
  bad.mutable_operators(0)->mutable_pack_flat()->clear_pad_token_id();
  expect_error(bad, "needs pad_token_id");
  bad = good;
  bad.mutable_operators(0)->mutable_pack_flat()->set_pad_token_id(-1);
  expect_error(bad, "pad_token_id must be >= 0");
  bad = good;
  bad.mutable_operators(0)->mutable_pack_flat()->set_num_bins(0);
  expect_error(bad, "num_bins must be in [1, 4096]");
  bad = good;
  bad.mutable_operators(0)->mutable_pack_flat()->set_num_bins(kMaxNumBins + 1);
  expect_error(bad, "num_bins");
  bad = good;
  bad.mutable_operators(0)->mutable_pack_flat()->set_candidate_pool_size(8);
  expect_error(bad, "candidate_pool_size applies to best_fit_wrap only");
  auto wrap = LaneSpec(5, 1, 4, 2, true);
  wrap.mutable_operators(0)->mutable_pack_flat()->set_pad_token_id(0);
  expect_error(wrap, "never pads");
  wrap = LaneSpec(5, 1, 4, 2, true);
  wrap.mutable_operators(0)->mutable_pack_flat()->set_num_bins(4);
  expect_error(wrap, "num_bins applies to first_fit and best_fit only");
  auto pool = LaneSpec(5, 1, 4, 2, true);
  pool.mutable_operators(0)->mutable_pack_flat()->set_algorithm("best_fit_wrap");
  pool.mutable_operators(0)->mutable_pack_flat()->set_pad_token_id(0);
  pool = ResolveSpec(pool, 1).value();
  const LaneOptions o = LaneOptions::FromSpec(pool).value();
  EXPECT_EQ(o.pack.candidate_pool_size, kDefaultCandidatePoolSize);
  EXPECT_EQ(o.pack.max_candidate_age, kCandidateAgeFactor * kDefaultCandidatePoolSize);
  pool.mutable_operators(0)->mutable_pack_flat()->set_drop_oversized(false);
  expect_error(pool, "drop_oversized applies to first_fit and best_fit only");
}


TEST(LaneOptionsTest, PackingKnobsAreValidatedAndDescribed) {
  auto expect_error = [](const proto::PipelineSpec& spec, const std::string& needle) {
    auto s = LaneOptions::FromSpec(spec);
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status();
  };
  auto knobs = BestFitSpec(6, 2);
  auto* pack = knobs.mutable_operators(0)->mutable_pack_flat();
  pack->set_min_sequence_length(3);
  pack->set_flush_strategy("fullest");
  pack->set_max_sequences_per_bin(4);
  const LaneOptions o = LaneOptions::FromSpec(knobs).value();
  EXPECT_EQ(o.pack.min_sequence_length, 3u);
  EXPECT_TRUE(o.pack.flush_fullest);
  EXPECT_EQ(o.pack.max_sequences_per_bin, 4u);
  EXPECT_NE(o.Describe().find("min_sequence_length=3, flush_strategy=fullest, "
                              "max_sequences_per_bin=4"),
            std::string::npos) << o.Describe();
  auto bad = knobs;
  bad.mutable_operators(0)->mutable_pack_flat()->set_flush_strategy("lifo");
  expect_error(bad, "operators[0] pack_flat.flush_strategy 'lifo' unknown (fifo, fullest)");
  bad = knobs;
  bad.mutable_operators(0)->mutable_pack_flat()->set_min_sequence_length(7);
  expect_error(bad, "min_sequence_length must be in [1, max_length=6], got 7");
  auto wrap = LaneSpec(5, 1, 4, 2, true);
  wrap.mutable_operators(0)->mutable_pack_flat()->set_max_sequences_per_bin(2);
  expect_error(wrap, "max_sequences_per_bin applies to first_fit, best_fit and best_fit_wrap "
                     "only, not algorithm 'wrap'");
  wrap = LaneSpec(5, 1, 4, 2, true);
  wrap.mutable_operators(0)->mutable_pack_flat()->set_flush_strategy("fifo");
  expect_error(wrap, "flush_strategy applies to first_fit and best_fit only");
}

}  // namespace
}  // namespace zephon::pipeline
