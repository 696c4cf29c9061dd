// The reordering operators in a lane's chain: shuffle algorithms, the shuffle of
// packed rows, ensure_mixture, and the chain's validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/pipeline/batching/lane_stream.h"
#include "daemon/pipeline/batching/mixture_stats.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/spec.h"

namespace zephon::pipeline {
namespace {

using testing::MakeSyntheticDataset;

// Two datasets, weights 3:1, chunk 6, 3 lanes, flush every 2 lane chunks; `middle`
// goes between the work source and pack_flat, `rows` between pack_flat and batch.
proto::PipelineSpec Spec(const std::vector<proto::OperatorSpec>& middle,
                         const std::vector<proto::OperatorSpec>& rows,
                         const std::string& algorithm = "wrap") {
  proto::PipelineSpec spec;
  auto* ws = spec.mutable_work_source();
  for (const char* name : {"a", "b"}) {
    auto* d = ws->add_datasets();
    d->set_name(name);
    d->set_path("/unused");
  }
  ws->add_weights(3);
  ws->add_weights(1);
  ws->set_chunk_size(6);
  ws->set_shuffle_within_shard(true);
  spec.set_canonical_replicas(3);
  spec.set_flush_every_k_chunks(2);
  for (const auto& op : middle) *spec.add_operators() = op;
  auto* pack = spec.add_operators()->mutable_pack_flat();
  pack->set_max_length(9);
  pack->set_algorithm(algorithm);
  if (algorithm != "wrap") pack->set_pad_token_id(0);
  if (algorithm == "best_fit") pack->set_num_bins(2);
  for (const auto& op : rows) *spec.add_operators() = op;
  auto* batch = spec.add_operators()->mutable_batch();
  batch->set_microbatch_size(2);
  batch->set_drop_last(false);
  return spec;
}

proto::OperatorSpec Shuffle(uint64_t buffer_size, const std::string& algorithm = "") {
  proto::OperatorSpec op;
  op.mutable_shuffle()->set_buffer_size(buffer_size);
  op.mutable_shuffle()->set_seed(5);
  op.mutable_shuffle()->set_algorithm(algorithm);
  return op;
}

proto::OperatorSpec Mixture(uint64_t max_buffer_size) {
  proto::OperatorSpec op;
  op.mutable_ensure_mixture()->set_max_buffer_size(max_buffer_size);
  return op;
}

std::vector<std::shared_ptr<const Dataset>> Corpus() {
  return {MakeSyntheticDataset("a", 1, 3, 30, 12), MakeSyntheticDataset("b", 2, 2, 25, 7)};
}

std::unique_ptr<LaneStream> MakeLane(const proto::PipelineSpec& resolved,
                                     const std::vector<std::shared_ptr<const Dataset>>& ds,
                                     uint32_t lane, LanePosition start = {},
                                     uint64_t first = 0) {
  std::shared_ptr<const WorkSource> ws(WorkSource::Create(resolved.work_source(), ds).value());
  return LaneStream::Create(ws, LaneOptions::FromSpec(resolved).value(), lane, start, first)
      .value();
}

std::vector<Batch> Drain(LaneStream* lane) {
  std::vector<Batch> all;
  while (auto b = lane->Next().value()) all.push_back(*b);
  return all;
}

// The chains of this slice, each restarted at every batch end of every lane: the rest
// of the lane is reproduced byte for byte, and a second run is identical.
TEST(LaneStreamReorderTest, EveryChainRestartsAtEveryBatchEnd) {
  const std::vector<proto::PipelineSpec> chains = {
      Spec({Shuffle(4, "block")}, {}),
      Spec({Shuffle(40, "block_warmup")}, {}),
      Spec({}, {Shuffle(3)}),
      Spec({Shuffle(5)}, {Shuffle(2, "block")}, "best_fit"),
      Spec({Mixture(4)}, {}),
      Spec({Mixture(0)}, {}, "best_fit"),
      Spec({Shuffle(6), Mixture(3)}, {Shuffle(4, "block_warmup")}),
      Spec({Mixture(5), Shuffle(6, "block")}, {}),
  };
  const auto ds = Corpus();
  size_t boundaries = 0;
  for (const proto::PipelineSpec& chain : chains) {
    const proto::PipelineSpec spec = ResolveSpec(chain, 1).value();
    for (uint32_t l = 0; l < 3; ++l) {
      const std::vector<Batch> all = Drain(MakeLane(spec, ds, l).get());
      ASSERT_GT(all.size(), 2u) << spec.ShortDebugString();
      const std::vector<Batch> again = Drain(MakeLane(spec, ds, l).get());
      ASSERT_EQ(again.size(), all.size());
      for (size_t k = 0; k <= all.size(); ++k) {
        const LanePosition from = k == 0 ? LanePosition{} : all[k - 1].end;
        auto resumed = MakeLane(spec, ds, l, from, k);
        const std::string where =
            absl::StrCat("lane ", l, " before batch ", k, "; ", spec.ShortDebugString());
        for (size_t j = k; j < all.size(); ++j) {
          auto b = resumed->Next().value();
          ASSERT_TRUE(b.has_value()) << where;
          EXPECT_EQ(b->tokens, all[j].tokens) << where << " batch " << j;
          EXPECT_EQ(b->positions, all[j].positions) << where << " batch " << j;
          EXPECT_EQ(b->sample_ids, all[j].sample_ids) << where << " batch " << j;
          EXPECT_TRUE(b->end == all[j].end) << where << " batch " << j;
        }
        EXPECT_FALSE(resumed->Next().value().has_value()) << where;
        ++boundaries;
      }
    }
  }
  EXPECT_GT(boundaries, 100u);
}

TEST(LaneStreamReorderTest, ShuffleOfRowsPermutesPackedRowsWithinFlushGroups) {
  const auto ds = Corpus();
  const auto plain_spec = ResolveSpec(Spec({}, {}, "best_fit"), 1).value();
  const auto rows_spec = ResolveSpec(Spec({}, {Shuffle(8)}, "best_fit"), 1).value();
  // One row per batch, so a batch's end names its row's flush group.
  auto one_row = [](proto::PipelineSpec s) {
    s.mutable_operators(s.operators_size() - 1)->mutable_batch()->set_microbatch_size(1);
    return s;
  };
  const auto plain = Drain(MakeLane(one_row(plain_spec), ds, 1).get());
  const auto shuffled = Drain(MakeLane(one_row(rows_spec), ds, 1).get());
  ASSERT_EQ(plain.size(), shuffled.size());
  std::map<uint64_t, std::vector<std::vector<int32_t>>> a, b;
  for (const Batch& x : plain) a[x.end.flush_group_chunk].push_back(x.tokens);
  for (const Batch& x : shuffled) b[x.end.flush_group_chunk].push_back(x.tokens);
  bool reordered = false;
  for (auto& [group, rows] : a) {
    auto& other = b[group];
    reordered |= rows != other;
    std::sort(rows.begin(), rows.end());
    std::sort(other.begin(), other.end());
    EXPECT_EQ(rows, other) << "flush group at lane chunk " << group;
  }
  EXPECT_TRUE(reordered);
}

TEST(LaneStreamReorderTest, StreamingNamedOrNotIsOneSpec) {
  const auto unset = ResolveSpec(Spec({Shuffle(4)}, {}), 1).value();
  const auto named = ResolveSpec(Spec({Shuffle(4, "streaming")}, {}), 1).value();
  EXPECT_EQ(unset.SerializeAsString(), named.SerializeAsString());
  EXPECT_FALSE(unset.operators(0).shuffle().has_warmup_growth());
  const auto warm = ResolveSpec(Spec({Shuffle(4, "block_warmup")}, {}), 1).value();
  EXPECT_EQ(warm.operators(0).shuffle().warmup_growth(), kDefaultWarmupGrowth);
  const auto mix = ResolveSpec(Spec({proto::OperatorSpec()}, {}), 1);
  EXPECT_FALSE(mix.ok());  // An empty operator is not in the grammar.
}

TEST(LaneStreamReorderTest, EnsureMixtureTracksTheTargetAndCountsExactModeDrops) {
  const auto ds = Corpus();
  // Exact mode: the lane's output is within SWRR's rounding of 3:1 per group.
  const auto spec = ResolveSpec(Spec({Mixture(0)}, {}), 1).value();
  auto lane = MakeLane(spec, ds, 0);
  const auto all = Drain(lane.get());
  ASSERT_FALSE(all.empty());
  const MixtureFigures f = lane->mixture_stats()->Snapshot(0);
  ASSERT_EQ(f.datasets.size(), 2u);
  EXPECT_DOUBLE_EQ(f.datasets[0].target_share + f.datasets[1].target_share, 1.0);
  EXPECT_NEAR(f.datasets[0].target_share, 0.75, 1e-6);
  EXPECT_NEAR(AchievedShare(f, 0), 0.75, 0.05);
  EXPECT_GT(f.datasets[0].samples, 0u);
  EXPECT_GT(f.datasets[1].samples, 0u);
  // Without ensure_mixture there are no mixture figures.
  EXPECT_EQ(MakeLane(ResolveSpec(Spec({}, {}), 1).value(), ds, 0)->mixture_stats(), nullptr);
}

TEST(LaneStreamReorderTest, TheShownTargetFollowsEachGroupsTargetWeightedByItsOutput) {
  // A curriculum moves the target from group to group: the figures compare what was
  // emitted with what those groups aimed at, not with the first chunk's weights.
  MixtureStats stats({0.5, 0.5}, /*weight_by_tokens=*/false);
  EXPECT_DOUBLE_EQ(stats.Snapshot(0).datasets[0].target_share, 0.5);  // before any group
  MixtureGroupCounts phase1;
  phase1.samples = {9, 1};
  phase1.tokens = {90, 10};
  stats.AddGroup(phase1, false, {0.9, 0.1});
  MixtureGroupCounts phase2;
  phase2.samples = {3, 7};
  phase2.tokens = {30, 70};
  stats.AddGroup(phase2, false, {0.3, 0.7});
  const MixtureFigures f = stats.Snapshot(0);
  EXPECT_NEAR(f.datasets[0].target_share, 0.6, 1e-12);
  EXPECT_NEAR(f.datasets[1].target_share, 0.4, 1e-12);
}

TEST(LaneStreamReorderTest, GroupsBeyondWarnToleranceAreCounted) {
  const auto ds = Corpus();
  auto with_tolerance = [&](double tolerance) {
    proto::OperatorSpec mix = Mixture(4);
    mix.mutable_ensure_mixture()->set_warn_tolerance(tolerance);
    auto lane = MakeLane(ResolveSpec(Spec({mix}, {}), 1).value(), ds, 0);
    Drain(lane.get());
    return lane->mixture_stats()->Snapshot(0).groups_over_tolerance;
  };
  // A group of a few dozen samples cannot hit 3:1 to within 1e-6, nor stray by 100%.
  EXPECT_GT(with_tolerance(1e-6), 0u);
  EXPECT_EQ(with_tolerance(1.0), 0u);
}

TEST(LaneStreamReorderTest, ChainPositionsAreValidatedWithClearErrors) {
  auto expect_error = [](const proto::PipelineSpec& spec, const std::string& needle) {
    auto s = ResolveSpec(spec, 1);
    ASSERT_FALSE(s.ok()) << needle;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(needle), std::string::npos) << s.status();
  };
  expect_error(Spec({Shuffle(2), Shuffle(3)}, {}), "operators[1]: a second shuffle before pack_flat");
  expect_error(Spec({Mixture(2), Mixture(3)}, {}), "a second ensure_mixture");
  expect_error(Spec({}, {Shuffle(2), Shuffle(3)}), "a second shuffle between pack_flat and batch");
  expect_error(Spec({}, {Mixture(2)}), "ensure_mixture must come before pack_flat");
  auto after_batch = Spec({}, {});
  *after_batch.add_operators() = Shuffle(2);
  expect_error(after_batch, "operators[2]: shuffle after batch would reorder whole batches");
  auto growth = Spec({Shuffle(2, "block")}, {});
  growth.mutable_operators(0)->mutable_shuffle()->set_warmup_growth(2);
  expect_error(growth, "operators[0] shuffle.warmup_growth applies to algorithm 'block_warmup'");
  growth = Spec({Shuffle(2, "block_warmup")}, {});
  growth.mutable_operators(0)->mutable_shuffle()->set_warmup_growth(1);
  expect_error(growth, "warmup_growth must be in (1, 1024]");
  expect_error(Spec({Shuffle(2, "reservoir")}, {}), "operators[0] shuffle.algorithm 'reservoir'");
  auto tokens = Spec({Mixture(2)}, {});
  tokens.mutable_work_source()->set_weight_by(proto::WorkSourceSpec::TOKENS);
  expect_error(tokens, "ensure_mixture.weight_by 'samples' with a work source weighing tokens");
}

TEST(LaneStreamReorderTest, DescribeNamesEveryStage) {
  const auto spec =
      ResolveSpec(Spec({Mixture(0), Shuffle(6, "block")}, {Shuffle(3, "block_warmup")}), 1)
          .value();
  const std::string d = LaneOptions::FromSpec(spec).value().Describe();
  EXPECT_NE(d.find("ensure_mixture(max_buffer_size=None (exact)"), std::string::npos) << d;
  EXPECT_LT(d.find("ensure_mixture"), d.find("shuffle(buffer_size=6, seed=5, algorithm=block)"))
      << d;
  EXPECT_NE(d.find("-> shuffle(buffer_size=3, seed=5, algorithm=block_warmup, "
                   "warmup_growth=1.5) of rows -> batch("),
            std::string::npos)
      << d;
}

}  // namespace
}  // namespace zephon::pipeline
