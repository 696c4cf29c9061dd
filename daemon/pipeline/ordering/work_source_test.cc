#include "daemon/pipeline/ordering/work_source.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "daemon/pipeline/formats/testing_corpus.h"

namespace zephon::pipeline {
namespace {

using testing::MakeMemoryDataset;
using testing::MakeSyntheticDataset;

proto::WorkSourceSpec Spec(const std::vector<std::string>& names, uint64_t chunk_size) {
  proto::WorkSourceSpec spec;
  for (const auto& n : names) {
    auto* d = spec.add_datasets();
    d->set_name(n);
    d->set_path("/unused");
  }
  spec.set_chunk_size(chunk_size);
  spec.set_seed(2024);
  // Resolved, as WorkSource::Create requires (ResolvePipeline's defaults).
  spec.set_exhausted_policy(proto::WorkSourceSpec::STOP_AFTER_PASSES);
  spec.set_stop_after_passes(1);
  return spec;
}

std::unique_ptr<WorkSource> Make(const proto::WorkSourceSpec& spec,
                                 std::vector<std::shared_ptr<const Dataset>> ds) {
  auto ws = WorkSource::Create(spec, std::move(ds));
  EXPECT_TRUE(ws.ok()) << ws.status();
  return ws.ok() ? *std::move(ws) : nullptr;
}

TEST(WorkSourceTest, RandomAccessEqualsSequentialReadingAndChunksAreFull) {
  auto spec = Spec({"a", "b"}, 16);
  spec.add_weights(0.75);
  spec.add_weights(0.25);
  spec.set_shuffle_shards(true);
  spec.set_shuffle_within_shard(true);
  spec.set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  auto ds = {MakeSyntheticDataset("a", 1, 3, 20, 5), MakeSyntheticDataset("b", 2, 2, 7, 5)};
  auto seq = Make(spec, ds);
  auto rnd = Make(spec, ds);
  std::vector<std::vector<SampleId>> chunks(60);
  for (uint64_t g = 0; g < chunks.size(); ++g) {
    seq->Chunk(g, &chunks[g]);
    ASSERT_EQ(chunks[g].size(), 16u);
  }
  std::vector<SampleId> got;
  for (uint64_t g : {59, 3, 40, 0, 17, 58, 1, 33}) {
    rnd->Chunk(g, &got);
    EXPECT_EQ(got, chunks[g]) << "chunk " << g;
  }
  // Every pass of dataset b (14 samples) visits each sample exactly once.
  std::vector<SampleId> b_draws;
  for (const auto& c : chunks) {
    for (const auto& id : c) {
      if (id.dataset == 1) b_draws.push_back(id);
    }
  }
  ASSERT_GE(b_draws.size(), 14u * 3);
  for (size_t pass = 0; pass < 3; ++pass) {
    std::set<SampleId> seen(b_draws.begin() + pass * 14, b_draws.begin() + (pass + 1) * 14);
    EXPECT_EQ(seen.size(), 14u) << "pass " << pass;
  }
  // Passes are reshuffled.
  EXPECT_FALSE(std::equal(b_draws.begin(), b_draws.begin() + 14, b_draws.begin() + 14));
}

TEST(WorkSourceTest, ChunksInterleaveComponentsSmoothly) {
  auto spec = Spec({"a", "b"}, 4);
  spec.add_weights(1);
  spec.add_weights(1);
  auto ws = Make(spec, {MakeSyntheticDataset("a", 1, 1, 100, 3),
                        MakeSyntheticDataset("b", 2, 1, 100, 3)});
  std::vector<SampleId> chunk;
  ws->Chunk(5, &chunk);
  std::vector<uint32_t> datasets;
  for (const auto& id : chunk) datasets.push_back(id.dataset);
  EXPECT_EQ(datasets, (std::vector<uint32_t>{0, 1, 0, 1}));
  // No shuffle: draws are in file order, chunk 5 holds draws 10 and 11 of each.
  EXPECT_EQ(chunk[0], (SampleId{0, 0, 10}));
  EXPECT_EQ(chunk[3], (SampleId{1, 0, 11}));
}

TEST(WorkSourceTest, SingleDatasetEndsAtFloorOfNOverChunkSize) {
  auto ds = MakeSyntheticDataset("a", 1, 2, 5, 3);  // N = 10.
  auto spec = Spec({"a"}, 3);
  EXPECT_EQ(Make(spec, {ds})->NumChunks(), std::optional<uint64_t>(3));
  spec.set_exhausted_policy(proto::WorkSourceSpec::STOP);
  EXPECT_EQ(Make(spec, {ds})->NumChunks(), std::optional<uint64_t>(3));
  spec.set_exhausted_policy(proto::WorkSourceSpec::STOP_AFTER_PASSES);
  spec.set_stop_after_passes(2);
  EXPECT_EQ(Make(spec, {ds})->NumChunks(), std::optional<uint64_t>(6));
  spec.set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  EXPECT_EQ(Make(spec, {ds})->NumChunks(), std::nullopt);
}

TEST(WorkSourceTest, PoliciesEndAtTheSlowestOrFastestDataset) {
  auto small = MakeSyntheticDataset("s", 1, 1, 10, 3);
  auto large = MakeSyntheticDataset("l", 2, 2, 50, 3);
  auto spec = Spec({"s", "l"}, 4);
  spec.add_weights(1);
  spec.add_weights(1);  // 2 + 2 per chunk.
  EXPECT_EQ(Make(spec, {small, large})->NumChunks(), std::optional<uint64_t>(50));
  spec.set_exhausted_policy(proto::WorkSourceSpec::STOP);
  EXPECT_EQ(Make(spec, {small, large})->NumChunks(), std::optional<uint64_t>(5));
  spec.set_exhausted_policy(proto::WorkSourceSpec::STOP_AFTER_PASSES);
  spec.set_stop_after_passes(2);
  EXPECT_EQ(Make(spec, {small, large})->NumChunks(), std::optional<uint64_t>(100));
  // Empty weights = proportional to sample counts (10 : 100).
  spec.clear_weights();
  spec.set_stop_after_passes(1);
  spec.set_chunk_size(11);
  EXPECT_EQ(Make(spec, {small, large})->NumChunks(), std::optional<uint64_t>(10));
}

TEST(WorkSourceTest, MaxRepeatsEndsTheStreamBeforeAnExtraPass) {
  auto small = MakeSyntheticDataset("s", 1, 1, 10, 3);
  auto large = MakeSyntheticDataset("l", 2, 2, 50, 3);
  auto spec = Spec({"s", "l"}, 4);
  spec.add_weights(1);
  spec.add_weights(1);  // 2 + 2 per chunk: s passes every 5 chunks, l every 50.
  spec.set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  EXPECT_EQ(Make(spec, {small, large})->NumChunks(), std::nullopt);
  spec.mutable_datasets(0)->set_max_repeats(0);
  EXPECT_EQ(Make(spec, {small, large})->NumChunks(), std::optional<uint64_t>(5));
  spec.mutable_datasets(0)->set_max_repeats(3);
  EXPECT_EQ(Make(spec, {small, large})->NumChunks(), std::optional<uint64_t>(20));
  spec.mutable_datasets(1)->set_max_repeats(0);  // min over limited datasets.
  EXPECT_EQ(Make(spec, {small, large})->NumChunks(), std::optional<uint64_t>(20));
  spec.mutable_datasets(0)->clear_max_repeats();
  auto ws = Make(spec, {small, large});
  EXPECT_EQ(ws->NumChunks(), std::optional<uint64_t>(50));
  EXPECT_NE(ws->Describe().find("max_repeats 0"), std::string::npos) << ws->Describe();
  // Uneven quotas: 3 of s per chunk of 4 -> s (10 samples) allows 2 passes = 20 draws;
  // A_s(n) = 3n <= 20 holds up to n = 6 (18 draws); chunk 7 would need draw 20.
  spec.clear_weights();
  spec.add_weights(3);
  spec.add_weights(1);
  spec.mutable_datasets(0)->set_max_repeats(1);
  spec.mutable_datasets(1)->clear_max_repeats();
  ws = Make(spec, {small, large});
  ASSERT_EQ(ws->NumChunks(), std::optional<uint64_t>(6));
  std::vector<SampleId> chunk;
  std::map<SampleId, int> uses;
  for (uint64_t g = 0; g < 6; ++g) {
    ws->Chunk(g, &chunk);
    for (const auto& id : chunk) ++uses[id];
  }
  for (const auto& [id, n] : uses) {
    if (id.dataset == 0) {
      EXPECT_LE(n, 2) << id;
    }
  }
}

// Per-dataset policies (repetition.h): one dataset repeats forever as filler while
// another stops the stream when it runs out.
TEST(WorkSourceTest, PerDatasetPolicyFillerRepeatsWhileTheOtherStops) {
  auto small = MakeSyntheticDataset("s", 1, 1, 10, 3);
  auto large = MakeSyntheticDataset("l", 2, 2, 50, 3);
  auto spec = Spec({"s", "l"}, 4);
  spec.add_weights(1);
  spec.add_weights(1);  // 2 + 2 per chunk: s (10) passes every 5 chunks, l (100) every 50.
  // With s the filler ("repeat") and l "stop", the stream ends when l runs out, and s
  // repeats 10 times meanwhile.
  spec.mutable_datasets(0)->set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  spec.mutable_datasets(1)->set_exhausted_policy(proto::WorkSourceSpec::STOP);
  auto ws = Make(spec, {small, large});
  ASSERT_EQ(ws->NumChunks(), std::optional<uint64_t>(50));
  std::map<SampleId, int> uses;
  std::vector<SampleId> chunk;
  for (uint64_t g = 0; g < 50; ++g) {
    ws->Chunk(g, &chunk);
    for (const auto& id : chunk) ++uses[id];
  }
  EXPECT_EQ(uses.size(), 110u);
  for (const auto& [id, n] : uses) EXPECT_EQ(n, id.dataset == 0 ? 10 : 1) << id;
  EXPECT_NE(ws->Describe().find("policy repeat"), std::string::npos) << ws->Describe();
  EXPECT_NE(ws->Describe().find("policy stop)"), std::string::npos) << ws->Describe();
  // The roles swapped: the large dataset is the filler, the small one stops at once.
  spec.mutable_datasets(0)->set_exhausted_policy(proto::WorkSourceSpec::STOP);
  spec.mutable_datasets(1)->set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  EXPECT_EQ(Make(spec, {small, large})->NumChunks(), std::optional<uint64_t>(5));
  // Both fillers: infinite.
  spec.mutable_datasets(0)->set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  EXPECT_EQ(Make(spec, {small, large})->NumChunks(), std::nullopt);
  // Per-dataset stop_after_passes: s must finish 12 passes (60 chunks) while l, the
  // filler, repeats; the floor is the max over stop_after_passes datasets.
  spec.mutable_datasets(0)->clear_exhausted_policy();
  spec.mutable_datasets(0)->set_stop_after_passes(12);
  EXPECT_EQ(Make(spec, {small, large})->NumChunks(), std::optional<uint64_t>(60));
  // ...capped by a stopping dataset: min(floor, cap).
  spec.mutable_datasets(1)->set_exhausted_policy(proto::WorkSourceSpec::STOP);
  EXPECT_EQ(Make(spec, {small, large})->NumChunks(), std::optional<uint64_t>(50));
}

TEST(WorkSourceTest, ReshuffleOnRepeatFalseReplaysTheFirstPass) {
  auto ds = MakeSyntheticDataset("a", 3, 3, 7, 5);  // 21 samples.
  auto spec = Spec({"a"}, 7);
  spec.set_shuffle_shards(true);
  spec.set_shuffle_within_shard(true);
  spec.set_shuffle_block_size("5");
  spec.set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  auto draws = [&](const proto::WorkSourceSpec& s) {
    auto ws = Make(s, {ds});
    std::vector<SampleId> all, chunk;
    for (uint64_t g = 0; g < 9; ++g) {  // Three passes.
      ws->Chunk(g, &chunk);
      all.insert(all.end(), chunk.begin(), chunk.end());
    }
    return all;
  };
  const std::vector<SampleId> reshuffled = draws(spec);
  const std::vector<SampleId> first(reshuffled.begin(), reshuffled.begin() + 21);
  // Default (true, today's behaviour): pass 1 is another order.
  EXPECT_NE(std::vector<SampleId>(reshuffled.begin() + 21, reshuffled.begin() + 42), first);
  spec.set_reshuffle_on_repeat(false);
  const std::vector<SampleId> replayed = draws(spec);
  for (int e = 0; e < 3; ++e) {
    EXPECT_EQ(std::vector<SampleId>(replayed.begin() + 21 * e, replayed.begin() + 21 * (e + 1)),
              first)
        << "pass " << e;
  }
  // The dataset's own field overrides the work source's default.
  spec.mutable_datasets(0)->set_reshuffle_on_repeat(true);
  EXPECT_EQ(draws(spec), reshuffled);
  spec.clear_reshuffle_on_repeat();
  spec.mutable_datasets(0)->set_reshuffle_on_repeat(false);
  EXPECT_EQ(draws(spec), replayed);
}

// ScheduledMixtureWorkSource: any chunk from a fresh source equals the chunk read in
// sequence (restore needs no replay, mid-phase or across a boundary), a phase's
// weight-0 dataset draws nothing, and a chunk far out is computed at once.
TEST(WorkSourceTest, ScheduledChunksAreRandomAccessAndFollowThePhases) {
  auto spec = Spec({"web", "code"}, 16);
  spec.set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  spec.set_shuffle_shards(true);
  spec.set_shuffle_within_shard(true);
  for (auto [start, w0, w1] : {std::tuple<uint64_t, double, double>{0, 1, 0}, {7, 1, 3},
                               {19, 0, 1}}) {
    auto* e = spec.add_schedule();
    e->set_start_chunk(start);
    e->add_weights(w0);
    e->add_weights(w1);
  }
  auto ds = {MakeSyntheticDataset("web", 1, 3, 20, 5), MakeSyntheticDataset("code", 2, 2, 9, 5)};
  for (auto interp : {proto::WorkSourceSpec::STEP, proto::WorkSourceSpec::LINEAR}) {
    spec.set_interpolate(interp);
    auto seq = Make(spec, ds);
    ASSERT_NE(seq->phase_schedule(), nullptr);
    EXPECT_NE(seq->Describe().find("ScheduledMixture["), std::string::npos) << seq->Describe();
    std::vector<std::vector<SampleId>> chunks(30);
    std::map<uint32_t, uint64_t> per_dataset_after_19;
    for (uint64_t g = 0; g < chunks.size(); ++g) {
      seq->Chunk(g, &chunks[g]);
      EXPECT_GE(chunks[g].size(), 15u);
      EXPECT_LE(chunks[g].size(), 17u);
      for (const auto& id : chunks[g]) {
        if (g < 7 && interp == proto::WorkSourceSpec::STEP) EXPECT_EQ(id.dataset, 0u) << g;
        if (g >= 19) ++per_dataset_after_19[id.dataset];
      }
    }
    EXPECT_EQ(per_dataset_after_19[0], 0u);
    // Restore anywhere (mid-phase 3, 12; at and across boundaries 7, 19, 20).
    auto fresh = Make(spec, ds);
    std::vector<SampleId> got;
    for (uint64_t g : {20, 7, 12, 19, 3, 29, 0}) {
      fresh->Chunk(g, &got);
      EXPECT_EQ(got, chunks[g]) << "chunk " << g;
    }
    // Draws are numbered globally: chunks hold consecutive, distinct draws per pass.
    std::vector<uint64_t> before, after;
    seq->DrawsBefore(19, &before);
    seq->DrawsBefore(29, &after);
    EXPECT_EQ(after[0], before[0]);
    EXPECT_EQ(after[1] - before[1] + after[0] - before[0], 160u);
    fresh->Chunk(uint64_t{1} << 50, &got);  // O(phases): no replay of 2^50 chunks.
    EXPECT_EQ(got.size(), 16u);
  }
}

TEST(WorkSourceTest, ChecksWhatNeedsTheOpenedDataAndRefusesAnUnresolvedSpec) {
  // Names, weight counts, max_repeats and the policy are ResolvePipeline's to check
  // (spec_test); Create checks what needs the opened datasets.
  auto a = MakeSyntheticDataset("a", 1, 1, 10, 3);
  auto b = MakeSyntheticDataset("b", 1, 1, 10, 3);
  auto spec = Spec({"a", "b"}, 4);
  spec.add_weights(1);
  spec.add_weights(0);
  auto s = WorkSource::Create(spec, {a, b});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("weights[1]"), std::string::npos) << s.status();
  EXPECT_FALSE(WorkSource::Create(Spec({"a"}, 4), {a, b}).ok());
  auto unresolved = Spec({"a"}, 4);
  unresolved.clear_exhausted_policy();
  s = WorkSource::Create(unresolved, {a});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("exhausted_policy is unset"), std::string::npos)
      << s.status();
  s = WorkSource::Create(Spec({"a"}, 0), {a});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("chunk_size"), std::string::npos) << s.status();
}

TEST(WorkSourceTest, DatasetTooSmallForOneChunkIsAnErrorNamingIt) {
  auto small = MakeSyntheticDataset("tiny", 1, 1, 10, 3);  // 10 samples.
  auto large = MakeSyntheticDataset("large", 2, 2, 50, 3);  // 100 samples.
  auto s = WorkSource::Create(Spec({"tiny"}, 16), {small});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("dataset 'tiny' has 10 samples, fewer than its share of "
                                      "one chunk (16 of chunk_size=16)"),
            std::string::npos)
      << s.status();
  // "stop" ends at the first exhausted dataset: only the small one is named.
  auto spec = Spec({"tiny", "large"}, 32);
  spec.add_weights(1);
  spec.add_weights(1);
  spec.set_exhausted_policy(proto::WorkSourceSpec::STOP);
  s = WorkSource::Create(spec, {small, large});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("dataset 'tiny' has 10 samples"), std::string::npos)
      << s.status();
  EXPECT_EQ(s.status().message().find("'large'"), std::string::npos) << s.status();
  // Two passes of 10 fill a chunk of 16: allowed.
  spec = Spec({"tiny"}, 16);
  spec.set_stop_after_passes(2);
  EXPECT_EQ(Make(spec, {small})->NumChunks(), std::optional<uint64_t>(1));
}

// Shares of drawn samples and drawn tokens per dataset over chunks [0, n).
struct Shares {
  std::vector<double> samples, tokens;
};
Shares DrawnShares(const WorkSource& ws, uint64_t n) {
  const size_t k = ws.datasets().size();
  std::vector<double> samples(k, 0), tokens(k, 0);
  double all_samples = 0, all_tokens = 0;
  std::vector<SampleId> chunk;
  for (uint64_t g = 0; g < n; ++g) {
    ws.Chunk(g, &chunk);
    for (const SampleId& id : chunk) {
      const double len = static_cast<double>(
          ws.datasets()[id.dataset]->SampleLength(id.shard, id.index));
      samples[id.dataset] += 1;
      tokens[id.dataset] += len;
      all_samples += 1;
      all_tokens += len;
    }
  }
  for (size_t d = 0; d < k; ++d) {
    samples[d] /= all_samples;
    tokens[d] /= all_tokens;
  }
  return {samples, tokens};
}

TEST(WorkSourceTest, WeightByTokensGivesTokenSharesAndSamplesGivesSampleShares) {
  // Very different sample lengths: "short" 8 tokens each, "long" 1..125 (mean 63).
  const auto short_ds = MakeMemoryDataset(
      "short", {std::vector<std::vector<int32_t>>(50, std::vector<int32_t>(8, 1))});
  const auto long_ds = MakeSyntheticDataset("long", 2, 2, 40, 400);
  auto spec = Spec({"short", "long"}, 64);
  spec.add_weights(0.3);
  spec.add_weights(0.7);
  spec.set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  // 2000 chunks: hundreds of passes over "long", whose estimate is exact (80 samples).
  const Shares by_samples = DrawnShares(*Make(spec, {short_ds, long_ds}), 2000);
  EXPECT_NEAR(by_samples.samples[0], 0.3, 1e-3);
  EXPECT_NEAR(by_samples.samples[1], 0.7, 1e-3);
  // 8-token samples hold few of the tokens: 0.3 * 8 / (0.3 * 8 + 0.7 * 63) = 0.0516.
  EXPECT_NEAR(by_samples.tokens[0], 0.0516, 1e-3);
  spec.set_weight_by(proto::WorkSourceSpec::TOKENS);
  const auto ws = Make(spec, {short_ds, long_ds});
  ASSERT_EQ(ws->tokens_per_sample().size(), 2u);
  EXPECT_EQ(ws->tokens_per_sample()[0], 8.0);
  EXPECT_EQ(ws->tokens_per_sample()[1], 63.0);
  const Shares by_tokens = DrawnShares(*ws, 2000);
  EXPECT_NEAR(by_tokens.tokens[0], 0.3, 2e-3);
  EXPECT_NEAR(by_tokens.tokens[1], 0.7, 2e-3);
  // Most samples are the short ones: 0.3/8 : 0.7/63 = 0.7714 : 0.2286.
  EXPECT_NEAR(by_tokens.samples[0], 0.7714, 1e-3);
  // explain shows the estimates and the sample weights they gave.
  const std::string d = ws->Describe();
  EXPECT_NE(d.find("short(memory, 1 shards, 50 samples, token share 0.3, tokens/sample 8, "
                   "sample weight 0.77"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("weight_by=tokens"), std::string::npos) << d;
  EXPECT_EQ(Make(Spec({"short"}, 4), {short_ds})->tokens_per_sample().size(), 0u);
}

TEST(WorkSourceTest, WeightByTokensWithoutWeightsIsSampleProportional) {
  const auto a = MakeSyntheticDataset("a", 1, 2, 30, 5);
  const auto b = MakeSyntheticDataset("b", 2, 3, 50, 300);
  auto spec = Spec({"a", "b"}, 16);
  auto by_samples = Make(spec, {a, b});
  spec.set_weight_by(proto::WorkSourceSpec::TOKENS);
  auto by_tokens = Make(spec, {a, b});
  ASSERT_EQ(by_tokens->NumChunks(), by_samples->NumChunks());
  std::vector<SampleId> x, y;
  for (uint64_t g = 0; g < *by_tokens->NumChunks(); ++g) {
    by_samples->Chunk(g, &x);
    by_tokens->Chunk(g, &y);
    ASSERT_EQ(x, y) << "chunk " << g;
  }
}

TEST(WorkSourceTest, WeightByTokensRefusesADatasetWithoutTokens) {
  const auto empty = MakeMemoryDataset("blank", {{{}, {}, {}, {}}});
  const auto a = MakeSyntheticDataset("a", 1, 1, 10, 3);
  auto spec = Spec({"a", "blank"}, 2);
  spec.set_weight_by(proto::WorkSourceSpec::TOKENS);
  auto s = WorkSource::Create(spec, {a, empty});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("dataset 'blank' has 0 tokens per sample"),
            std::string::npos)
      << s.status();
  spec.set_weight_by(static_cast<proto::WorkSourceSpec::WeightBy>(7));
  s = WorkSource::Create(spec, {a, empty});
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("weight_by 7 unknown"), std::string::npos) << s.status();
}

}  // namespace
}  // namespace zephon::pipeline
