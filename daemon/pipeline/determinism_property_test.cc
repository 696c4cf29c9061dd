// Property test of the elastic determinism guarantee over random specs.
//
// For ~40 specs drawn from a fixed seed (random corpora, weights, chunk sizes, every
// shuffle, repeat policy with occasional max_repeats, C in {2,3,4,6,8}, both routings
// and mappings, random operators, every pack_flat algorithm with random bins, pools
// and oversized policy, every shuffle algorithm, ensure_mixture and the shuffle of
// rows, curricula with per-dataset repetition), and every D dividing C: each step (C
// batches in
// total, C/D from each group) holds the same multiset of (lane, lane_batch_index,
// tokens, positions, sample ids) as with D = 1, and two independent runs produce
// byte-identical output.
#include <gtest/gtest.h>

#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/mix.h"
#include "daemon/pipeline/batching/group_stream.h"
#include "daemon/pipeline/ordering/lanes.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/formats/testing_corpus.h"

namespace zephon::pipeline {
namespace {

constexpr uint64_t kSeed = 20240611;
constexpr int kCases = 40;
constexpr size_t kMaxSteps = 32;

// Deterministic across platforms (std distributions are implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Below(uint64_t n) { return Combine(state_, counter_++) % n; }
  uint64_t Range(uint64_t lo, uint64_t hi) { return lo + Below(hi - lo + 1); }
  bool Coin() { return Below(2) == 1; }

 private:
  const uint64_t state_;
  uint64_t counter_ = 0;
};

struct Shape {
  uint32_t shards, per_shard, max_len;
};

struct Case {
  proto::PipelineSpec spec;  // Resolved.
  std::vector<Shape> shapes;
  std::string label;
};

// The reordering operators of the chain grammar (chain_spec.h), drawn from their own
// stream so the rest of each case is what it was before they existed: the shuffle's
// algorithm, ensure_mixture before pack_flat (bounded or exact, either side of the
// shuffle), a shuffle of rows between pack_flat and batch.
void AddReorderOperators(int index, proto::PipelineSpec* spec) {
  Rng rng(Combine(kSeed ^ 0xC4A1, index));
  auto* ops = spec->mutable_operators();
  const bool has_shuffle = ops->Get(0).has_shuffle();
  if (has_shuffle) {
    static const char* kAlgorithms[] = {"", "streaming", "block", "block_warmup"};
    ops->Mutable(0)->mutable_shuffle()->set_algorithm(kAlgorithms[rng.Below(4)]);
  }
  if (rng.Below(3) == 0) {
    proto::OperatorSpec mix;
    mix.mutable_ensure_mixture()->set_max_buffer_size(rng.Below(3) == 0 ? 0 : rng.Range(1, 12));
    mix.mutable_ensure_mixture()->set_drain_target_ratio(
        static_cast<double>(rng.Below(10)) / 10);
    if (rng.Coin()) mix.mutable_ensure_mixture()->set_weight_by("tokens");
    const int at = has_shuffle && rng.Coin() ? 1 : 0;
    ops->Add();
    for (int k = ops->size() - 1; k > at; --k) ops->SwapElements(k, k - 1);
    *ops->Mutable(at) = mix;
  }
  if (rng.Below(3) == 0) {
    proto::OperatorSpec rows;
    rows.mutable_shuffle()->set_buffer_size(rng.Range(1, 6));
    rows.mutable_shuffle()->set_seed(rng.Below(1000));
    static const char* kAlgorithms[] = {"streaming", "block", "block_warmup"};
    rows.mutable_shuffle()->set_algorithm(kAlgorithms[rng.Below(3)]);
    ops->Add();
    ops->SwapElements(ops->size() - 1, ops->size() - 2);  // Before batch.
    *ops->Mutable(ops->size() - 2) = rows;
  }
}

Case RandomCase(int index) {
  Rng rng(Combine(kSeed, index));
  Case c;
  auto* ws = c.spec.mutable_work_source();
  const int num_datasets = static_cast<int>(rng.Range(1, 3));
  const bool weighted = rng.Coin();
  for (int k = 0; k < num_datasets; ++k) {
    Shape shape{static_cast<uint32_t>(rng.Range(1, 4)), static_cast<uint32_t>(rng.Range(2, 30)),
                static_cast<uint32_t>(rng.Range(1, 20))};
    c.shapes.push_back(shape);
    auto* d = ws->add_datasets();
    d->set_name(absl::StrCat("ds", k));
    d->set_path(absl::StrCat("/unused/ds", k));
    if (rng.Below(4) == 0) d->set_max_repeats(static_cast<uint32_t>(rng.Range(0, 6)));
    if (weighted) ws->add_weights(0.1 + static_cast<double>(rng.Range(0, 29)) / 10);
  }
  ws->set_seed(rng.Below(1000000));
  ws->set_chunk_size(rng.Range(1, 12));
  ws->set_shuffle_shards(rng.Coin());
  ws->set_shuffle_within_shard(rng.Coin());
  switch (rng.Below(4)) {
    case 0: break;
    case 1: ws->set_shuffle_block_size("auto"); break;
    case 2: ws->set_shuffle_block_size("global"); break;
    default: ws->set_shuffle_block_size(absl::StrCat(rng.Range(1, 20))); break;
  }
  ws->set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  static constexpr uint32_t kLanes[] = {2, 3, 4, 6, 8};
  c.spec.set_canonical_replicas(kLanes[rng.Below(5)]);
  c.spec.set_lane_routing(rng.Coin() ? proto::PipelineSpec::PERMUTE : proto::PipelineSpec::MODULO);
  c.spec.set_mapping_strategy(rng.Coin() ? proto::PipelineSpec::CONTIGUOUS : proto::PipelineSpec::INTERLEAVED);
  c.spec.set_flush_every_k_chunks(static_cast<uint32_t>(rng.Range(1, 4)));
  if (rng.Coin()) {
    auto* shuffle = c.spec.add_operators()->mutable_shuffle();
    shuffle->set_buffer_size(rng.Range(1, 8));
    shuffle->set_seed(rng.Below(1000));
  }
  auto* pack = c.spec.add_operators()->mutable_pack_flat();
  pack->set_max_length(rng.Range(2, 16));
  auto* batch = c.spec.add_operators()->mutable_batch();
  batch->set_microbatch_size(rng.Range(1, 3));
  batch->set_drop_last(rng.Coin());
  // Drawn last, so the rest of each case is what it was before the algorithms existed.
  switch (index % 4) {
    case 0: break;  // wrap
    case 1:
    case 2:
      pack->set_algorithm(index % 4 == 1 ? "first_fit" : "best_fit");
      pack->set_num_bins(static_cast<uint32_t>(rng.Range(1, 4)));
      pack->set_drop_oversized(rng.Coin());
      break;
    default:
      pack->set_algorithm("best_fit_wrap");
      pack->set_candidate_pool_size(rng.Range(1, 6));
      pack->set_max_candidate_age(rng.Range(1, 12));
      break;
  }
  if (index % 4 != 0) pack->set_pad_token_id(static_cast<int32_t>(rng.Below(100)));
  // Drawn after everything above: every third case becomes a curriculum (step or
  // linear, weights 0 included) with per-dataset repetition, the others stay as they were.
  if (index % 3 == 2) {
    ws->clear_weights();
    ws->set_interpolate(rng.Coin() ? proto::WorkSourceSpec::LINEAR : proto::WorkSourceSpec::STEP);
    uint64_t start = 0;
    const int entries = static_cast<int>(rng.Range(2, 3));
    for (int e = 0; e < entries; ++e) {
      auto* entry = ws->add_schedule();
      entry->set_start_chunk(start);
      start += rng.Range(1, 3 * c.spec.canonical_replicas());
      const size_t positive = rng.Below(static_cast<uint64_t>(num_datasets));
      for (int k = 0; k < num_datasets; ++k) {
        entry->add_weights(static_cast<size_t>(k) == positive || rng.Coin()
                               ? 0.1 + static_cast<double>(rng.Range(0, 29)) / 10
                               : 0.0);
      }
    }
    for (auto& d : *ws->mutable_datasets()) {
      if (rng.Coin()) d.set_reshuffle_on_repeat(false);
    }
    // A scheduled chunk holds chunk_size +- (K - 1) samples: below K it may be empty,
    // which PhaseSchedule refuses.
    if (ws->chunk_size() < static_cast<uint64_t>(num_datasets)) ws->set_chunk_size(num_datasets);
  }
  AddReorderOperators(index, &c.spec);
  auto resolved = ResolveSpec(c.spec, 1);
  EXPECT_TRUE(resolved.ok()) << resolved.status();
  c.spec = *resolved;
  c.label = absl::StrCat("case ", index, ": ", c.spec.ShortDebugString());
  return c;
}

// Fresh datasets for every run, so runs share no state.
std::vector<std::shared_ptr<const Dataset>> Corpus(const Case& c) {
  std::vector<std::shared_ptr<const Dataset>> out;
  for (size_t k = 0; k < c.shapes.size(); ++k) {
    const Shape& s = c.shapes[k];
    out.push_back(testing::MakeSyntheticDataset(absl::StrCat("ds", k), static_cast<int>(k + 1),
                                                s.shards, s.per_shard, s.max_len));
  }
  return out;
}

using Key = std::tuple<uint32_t, uint64_t, std::vector<int32_t>, std::vector<int32_t>,
                       std::vector<SampleId>>;

template <typename T>
void Put(const T& v, std::string* out) {
  out->append(reinterpret_cast<const char*>(&v), sizeof(T));
}

void Serialize(const Batch& b, std::string* out) {
  Put(b.lane, out);
  Put(b.lane_batch_index, out);
  Put(b.rows, out);
  Put(b.cols, out);
  Put(b.start.flush_group_chunk, out);
  Put(b.start.records_into_group, out);
  Put(b.tokens.size(), out);
  for (int32_t t : b.tokens) Put(t, out);
  Put(b.positions.size(), out);
  for (int32_t p : b.positions) Put(p, out);
  Put(b.valid_tokens.size(), out);
  for (int32_t v : b.valid_tokens) Put(v, out);
  Put(b.sample_ids.size(), out);
  for (const SampleId& id : b.sample_ids) {
    Put(id.dataset, out);
    Put(id.shard, out);
    Put(id.index, out);
  }
}

struct StreamRun {
  std::vector<std::multiset<Key>> steps;
  std::string bytes;  // Every batch consumed, in consumption order.
};

// Up to kMaxSteps steps of C batches (C/D from each group, groups in order). Stops at
// the first step that is not one batch from every lane: the guarantee covers steps
// while all lanes produce (a lane's length does not depend on D).
StreamRun Steps(const Case& c, uint32_t dp_degree) {
  const uint32_t lanes = static_cast<uint32_t>(c.spec.canonical_replicas());
  std::vector<std::unique_ptr<GroupStream>> groups;
  for (uint32_t d = 0; d < dp_degree; ++d) {
    auto owned = OwnedLanes(lanes, dp_degree, d, c.spec.mapping_strategy());
    EXPECT_TRUE(owned.ok()) << owned.status();
    auto g = GroupStream::Create(ResolvePipeline(c.spec, 1).value(), Corpus(c), *owned);
    EXPECT_TRUE(g.ok()) << g.status();
    if (!g.ok()) return {};
    groups.push_back(*std::move(g));
  }
  StreamRun run;
  while (run.steps.size() < kMaxSteps) {
    std::multiset<Key> step;
    for (auto& g : groups) {
      for (uint32_t i = 0; i < lanes / dp_degree; ++i) {
        auto b = g->Next();
        EXPECT_TRUE(b.ok()) << b.status();
        if (!b.ok() || !b->has_value()) return run;
        const Batch& batch = **b;
        Serialize(batch, &run.bytes);
        step.insert(Key{batch.lane, batch.lane_batch_index, batch.tokens, batch.positions,
                        batch.sample_ids});
      }
    }
    std::set<uint32_t> lanes_in_step;
    for (const Key& k : step) lanes_in_step.insert(std::get<0>(k));
    if (lanes_in_step.size() != lanes) return run;
    run.steps.push_back(std::move(step));
  }
  return run;
}

TEST(DeterminismPropertyTest, EveryDivisorOfCSeesTheSameStepsAndRunsAreReproducible) {
  size_t total_steps = 0, cases_with_steps = 0;
  for (int i = 0; i < kCases; ++i) {
    const Case c = RandomCase(i);
    const uint32_t lanes = static_cast<uint32_t>(c.spec.canonical_replicas());
    const StreamRun reference = Steps(c, 1);
    total_steps += reference.steps.size();
    if (reference.steps.size() >= 2) ++cases_with_steps;
    for (uint32_t d = 1; d <= lanes; ++d) {
      if (lanes % d != 0) continue;
      const StreamRun first = Steps(c, d);
      const StreamRun second = Steps(c, d);
      EXPECT_EQ(first.bytes, second.bytes) << "D=" << d << " not reproducible; " << c.label;
      ASSERT_EQ(first.steps.size(), reference.steps.size()) << "D=" << d << "; " << c.label;
      for (size_t s = 0; s < first.steps.size(); ++s) {
        ASSERT_TRUE(first.steps[s] == reference.steps[s])
            << "D=" << d << " step " << s << "; " << c.label;
      }
    }
  }
  std::cout << "steps compared: " << total_steps << ", cases with >= 2 steps: "
            << cases_with_steps << "\n";
  // The random specs must exercise something.
  EXPECT_GE(total_steps, 100u);
  EXPECT_GE(cases_with_steps, 20u);
}

}  // namespace
}  // namespace zephon::pipeline
