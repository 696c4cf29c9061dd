#include "daemon/pipeline/batching/packers.h"

#include <gtest/gtest.h>

#include <map>

namespace zephon::pipeline {
namespace {

PackOptions Options(PackAlgorithm algorithm, uint64_t max_length) {
  PackOptions o;
  o.algorithm = algorithm;
  o.max_length = max_length;
  o.num_bins = 2;
  o.candidate_pool_size = 2;
  o.max_candidate_age = 16;
  o.pad_token_id = 7;
  return o;
}

SampleId Id(uint64_t index) { return SampleId{0, 0, index}; }

// Adds samples of `lengths` (sample i has index i), flushes, returns the records as
// (index, offset, count) triples, padding as index -1.
using Piece = std::tuple<int64_t, uint64_t, uint64_t>;
std::vector<std::vector<Piece>> Pack(Packer* packer, const std::vector<uint64_t>& lengths) {
  std::deque<PackedRecord> out;
  for (size_t i = 0; i < lengths.size(); ++i) packer->Add(Id(i), lengths[i], &out);
  packer->Flush(&out);
  std::vector<std::vector<Piece>> records;
  for (const PackedRecord& r : out) {
    std::vector<Piece> pieces;
    for (const Segment& s : r.segments) {
      pieces.emplace_back(s.padding ? -1 : static_cast<int64_t>(s.id.index), s.offset, s.count);
    }
    records.push_back(pieces);
  }
  return records;
}

using Records = std::vector<std::vector<Piece>>;

TEST(PackersTest, WrapCutsAStreamAndDropsTheTail) {
  auto p = Packer::Create(Options(PackAlgorithm::kWrap, 4));
  EXPECT_EQ(Pack(p.get(), {3, 5, 0, 2, 4}),
            (Records{{{0, 0, 3}, {1, 0, 1}}, {{1, 1, 4}}, {{3, 0, 2}, {4, 0, 2}}}));
  EXPECT_EQ(p->counts().dropped_tokens, 2u);
}

TEST(PackersTest, FirstFitTakesTheFirstBinWithRoomBestFitTheTightest) {
  // 6 and 7 open two bins (room 4 and 3); 3 fits both.
  auto first = Packer::Create(Options(PackAlgorithm::kFirstFit, 10));
  EXPECT_EQ(Pack(first.get(), {6, 7, 3}),
            (Records{{{0, 0, 6}, {2, 0, 3}, {-1, 0, 1}}, {{1, 0, 7}, {-1, 0, 3}}}));
  auto best = Packer::Create(Options(PackAlgorithm::kBestFit, 10));
  // The full bin is emitted at once, the other at the flush.
  EXPECT_EQ(Pack(best.get(), {6, 7, 3}),
            (Records{{{1, 0, 7}, {2, 0, 3}}, {{0, 0, 6}, {-1, 0, 4}}}));
  EXPECT_EQ(best->counts().split_samples, 0u);
}

TEST(PackersTest, BinLimitEmitsTheOldestBin) {
  PackOptions o = Options(PackAlgorithm::kBestFit, 10);
  o.num_bins = 1;
  auto p = Packer::Create(o);
  EXPECT_EQ(Pack(p.get(), {6, 7, 2}),
            (Records{{{0, 0, 6}, {-1, 0, 4}}, {{1, 0, 7}, {2, 0, 2}, {-1, 0, 1}}}));
}

TEST(PackersTest, OversizedSamplesAreDroppedOrSplitAndCounted) {
  auto drop = Packer::Create(Options(PackAlgorithm::kFirstFit, 4));
  EXPECT_EQ(Pack(drop.get(), {9, 2}), (Records{{{1, 0, 2}, {-1, 0, 2}}}));
  EXPECT_EQ(drop->counts().dropped_samples, 1u);
  EXPECT_EQ(drop->counts().dropped_tokens, 9u);

  PackOptions o = Options(PackAlgorithm::kFirstFit, 4);
  o.drop_oversized = false;
  auto split = Packer::Create(o);
  EXPECT_EQ(Pack(split.get(), {9, 2}),
            (Records{{{0, 0, 4}}, {{0, 4, 4}}, {{0, 8, 1}, {1, 0, 2}, {-1, 0, 1}}}));
  EXPECT_EQ(split->counts().split_samples, 1u);
  EXPECT_EQ(split->counts().dropped_tokens, 0u);
}

TEST(PackersTest, BestFitWrapFillsWithWholeSamplesThenOneCut) {
  // Pool of 2: the third arrival fills a record: 7 whole, then the first 3 of the 6.
  // The flush packs the rest (4, then the 6's last 3) and pads.
  auto p = Packer::Create(Options(PackAlgorithm::kBestFitWrap, 10));
  EXPECT_EQ(Pack(p.get(), {4, 7, 6}),
            (Records{{{1, 0, 7}, {2, 0, 3}}, {{0, 0, 4}, {2, 3, 3}, {-1, 0, 3}}}));
  EXPECT_EQ(p->counts().split_samples, 1u);
}

TEST(PackersTest, BestFitWrapPlacesAgedSamplesFirst) {
  PackOptions o = Options(PackAlgorithm::kBestFitWrap, 10);
  o.candidate_pool_size = 1;
  o.max_candidate_age = 1;
  auto p = Packer::Create(o);
  // 2 arrives, then 9: the pool (2 samples, 11 tokens) fills a record; 2 has seen one
  // later arrival, so it goes first although 9 is larger; then 8 of the 9 (the cut).
  std::deque<PackedRecord> out;
  p->Add(Id(0), 2, &out);
  p->Add(Id(1), 9, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].segments, (std::vector<Segment>{{Id(0), 0, 2}, {Id(1), 0, 8}}));
}

// Every algorithm on random lengths: records of exactly max_length cells, padding only
// at a record's end and only when the algorithm pads, every token of every sample
// placed exactly once unless dropped, and the algorithm's split rules.
TEST(PackersTest, RandomLengthsKeepEveryInvariant) {
  for (PackAlgorithm a : {PackAlgorithm::kWrap, PackAlgorithm::kFirstFit,
                          PackAlgorithm::kBestFit, PackAlgorithm::kBestFitWrap}) {
    for (bool drop : {true, false}) {
      PackOptions o = Options(a, 16);
      o.num_bins = 3;
      o.candidate_pool_size = 4;
      o.max_candidate_age = 6;
      o.drop_oversized = drop;
      auto p = Packer::Create(o);
      std::vector<uint64_t> lengths;
      uint64_t x = 12345;
      for (int i = 0; i < 300; ++i) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        lengths.push_back((x >> 33) % 23);  // 0..22: empty and oversized samples too.
      }
      const Records records = Pack(p.get(), lengths);
      std::map<int64_t, uint64_t> placed;  // index -> tokens placed, in order
      for (const auto& r : records) {
        uint64_t cells = 0, cuts = 0;
        for (size_t k = 0; k < r.size(); ++k) {
          const auto& [index, offset, count] = r[k];
          ASSERT_GT(count, 0u);
          cells += count;
          if (index < 0) {
            EXPECT_TRUE(o.pads());
            EXPECT_EQ(k, r.size() - 1) << "padding ends a record";
            continue;
          }
          EXPECT_EQ(placed[index], offset) << "pieces in order, no gap, no repeat";
          placed[index] += count;
          if (offset + count < lengths[index]) ++cuts;
        }
        EXPECT_EQ(cells, 16u);
        if (a == PackAlgorithm::kBestFitWrap) {
          EXPECT_LE(cuts, 1u);
        }
      }
      uint64_t dropped = 0;
      for (size_t i = 0; i < lengths.size(); ++i) {
        const uint64_t got = placed.count(i) ? placed[i] : 0;
        if (got != lengths[i]) {
          dropped += lengths[i] - got;
          if (a != PackAlgorithm::kWrap) {
            EXPECT_TRUE(drop && lengths[i] > 16 && got == 0) << "sample " << i;
          }
        }
      }
      EXPECT_EQ(dropped, p->counts().dropped_tokens);
    }
  }
}


// Issue 16's packing knobs (upstream's names): each changes exactly the decision it
// names; unset they change nothing (the tests above).
TEST(PackersTest, MinSequenceLengthEmitsABinOnceItsRoomFallsBelowIt) {
  PackOptions o = Options(PackAlgorithm::kFirstFit, 10);
  // 7 leaves room 3 < 4: emitted at once, so 3 opens a bin of its own.
  o.min_sequence_length = 4;
  auto p = Packer::Create(o);
  EXPECT_EQ(Pack(p.get(), {7, 3, 2}),
            (Records{{{0, 0, 7}, {-1, 0, 3}}, {{1, 0, 3}, {2, 0, 2}, {-1, 0, 5}}}));
  auto off = Packer::Create(Options(PackAlgorithm::kFirstFit, 10));
  EXPECT_EQ(Pack(off.get(), {7, 3, 2}),
            (Records{{{0, 0, 7}, {1, 0, 3}}, {{2, 0, 2}, {-1, 0, 8}}}));
}

TEST(PackersTest, FlushStrategyFullestEmitsTheMostFilledBinAtTheLimit) {
  // Bins of 2 and 9 are open (num_bins 2); the next 9 fits neither: fifo emits the
  // oldest (the 2), fullest the 9. The flush emits the rest in opening order.
  for (PackAlgorithm algorithm : {PackAlgorithm::kFirstFit, PackAlgorithm::kBestFit}) {
    PackOptions o = Options(algorithm, 10);
    auto fifo = Packer::Create(o);
    EXPECT_EQ(Pack(fifo.get(), {2, 9, 9}),
              (Records{{{0, 0, 2}, {-1, 0, 8}}, {{1, 0, 9}, {-1, 0, 1}},
                       {{2, 0, 9}, {-1, 0, 1}}}));
    o.flush_fullest = true;
    auto fullest = Packer::Create(o);
    EXPECT_EQ(Pack(fullest.get(), {2, 9, 9}),
              (Records{{{1, 0, 9}, {-1, 0, 1}}, {{0, 0, 2}, {-1, 0, 8}},
                       {{2, 0, 9}, {-1, 0, 1}}}));
  }
  EXPECT_TRUE(ParseFlushFullest("fullest").value());
  EXPECT_FALSE(ParseFlushFullest("").value());
  EXPECT_FALSE(ParseFlushFullest("lifo").ok());
}

TEST(PackersTest, MaxSequencesPerBinCapsTheSegmentsOfARecord) {
  PackOptions o = Options(PackAlgorithm::kFirstFit, 10);
  o.max_sequences_per_bin = 2;
  auto bins = Packer::Create(o);
  EXPECT_EQ(Pack(bins.get(), {1, 1, 1, 1, 1}),
            (Records{{{0, 0, 1}, {1, 0, 1}, {-1, 0, 8}}, {{2, 0, 1}, {3, 0, 1}, {-1, 0, 8}},
                     {{4, 0, 1}, {-1, 0, 9}}}));
  o = Options(PackAlgorithm::kBestFitWrap, 10);
  o.candidate_pool_size = 1;
  o.max_sequences_per_bin = 2;
  auto pool = Packer::Create(o);
  for (const auto& record : Pack(pool.get(), {3, 3, 3, 3, 5})) {
    size_t samples = 0;
    for (const Piece& piece : record) samples += std::get<0>(piece) >= 0;
    EXPECT_LE(samples, 2u);
  }
}

}  // namespace
}  // namespace zephon::pipeline
