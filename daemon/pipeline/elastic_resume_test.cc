// Property test of elastic resume (docs/design.md "Checkpoint contract", the guide's
// "Planning For Elasticity"): checkpoint D groups after k steps (a step is C batches
// in total, C/D from each group), merge every group's progress after the batches it took
// (daemon::ProgressLog) into C topology-free lane progresses, restore on every D'
// dividing C, and the following steps hold exactly the multiset of (lane,
// lane_batch_index, tokens, positions, sample ids) of an uninterrupted D = 1 run; again
// after a second checkpoint/restore; a checkpoint at the end of data restores to
// nothing; and a checkpoint after any number of batches (mid-step) on the same
// topology continues batch by batch. The producer runs ahead of the readers (prefetch)
// and folds the log as batches are released, as the daemon does.
#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <iostream>
#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "daemon/progress_log.h"
#include "daemon/pipeline/spec_string_form.h"
#include "daemon/pipeline/batching/group_stream.h"
#include "daemon/pipeline/ordering/lanes.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/formats/testing_corpus.h"

namespace zephon::pipeline {
namespace {

constexpr size_t kPrefetch = 3;  // Batches produced (and recorded) beyond those taken.

std::vector<std::shared_ptr<const Dataset>> Corpus() {
  return {testing::MakeSyntheticDataset("web", 1, 4, 50, 13),
          testing::MakeSyntheticDataset("code", 2, 3, 40, 23)};
}

// pack_flat's algorithm with the options the tests use ("wrap" takes none).
void SetPacking(const std::string& algorithm, proto::PackFlatSpec* pack) {
  pack->set_algorithm(algorithm);
  if (algorithm == "wrap") return;
  pack->set_pad_token_id(0);
  if (algorithm == "first_fit") pack->set_num_bins(3);
  if (algorithm == "best_fit") {
    pack->set_num_bins(2);
    pack->set_drop_oversized(false);  // "code" samples reach 23 tokens: split them
  }
  if (algorithm == "best_fit_wrap") {
    pack->set_candidate_pool_size(4);
    pack->set_max_candidate_age(9);
  }
}

proto::PipelineSpec Spec(uint32_t lanes, const std::string& mapping,
                         const std::string& weight_by = "samples",
                         const std::string& algorithm = "wrap") {
  proto::PipelineSpec spec = pipeline::testing::SpecOverDatasets({"web", "code"});
  auto* ws = spec.mutable_work_source();
  ws->add_weights(0.6);
  ws->add_weights(0.4);
  ws->set_seed(4321);
  ws->set_chunk_size(3);
  ws->set_shuffle_shards(true);
  ws->set_shuffle_within_shard(true);
  ws->set_exhausted_policy(proto::WorkSourceSpec::STOP_AFTER_PASSES);
  ws->set_stop_after_passes(2);
  ws->set_weight_by(ParseWeightBy(weight_by).value());
  auto* shuffle = spec.add_operators()->mutable_shuffle();
  shuffle->set_buffer_size(5);
  shuffle->set_seed(31);
  auto* pack = spec.add_operators()->mutable_pack_flat();
  pack->set_max_length(11);
  SetPacking(algorithm, pack);
  auto* batch = spec.add_operators()->mutable_batch();
  batch->set_microbatch_size(3);  // Odd, so batches span flush groups.
  batch->set_drop_last(false);
  spec.set_canonical_replicas(lanes);
  spec.set_mapping_strategy(ParseMappingStrategy(mapping).value());
  spec.set_flush_every_k_chunks(2);
  return ResolveSpec(spec, 1).value();
}

using Key = std::tuple<uint32_t, uint64_t, std::vector<int32_t>, std::vector<int32_t>,
                       std::vector<SampleId>>;

// valid_tokens follows from tokens' padding segments, so the key needs no more.
Key KeyOf(const Batch& b) {
  return Key{b.lane, b.lane_batch_index, b.tokens, b.positions, b.sample_ids};
}

// One run on D groups: each group's stream, its producer-side prefetch queue and its
// progress log, as a PipelineInstance has them.
class Topology {
 public:
  Topology(const proto::PipelineSpec& spec, uint32_t dp_degree,
      const std::vector<proto::LaneProgress>* restore)
      : dp_degree_(dp_degree), groups_(dp_degree) {
    for (uint32_t d = 0; d < dp_degree; ++d) {
      auto owned = OwnedLanes(spec.canonical_replicas(), dp_degree, d,
                              spec.mapping_strategy());
      auto stream = GroupStream::Create(ResolvePipeline(spec, 1).value(), Corpus(), owned.value(), restore);
      EXPECT_TRUE(stream.ok()) << stream.status();
      groups_[d].stream = *std::move(stream);
      groups_[d].log = daemon::ProgressLog::Create(groups_[d].stream->Progress()).value();
    }
  }

  // The next batch group d takes, or nullopt at its end.
  std::optional<Batch> Take(uint32_t d) {
    Group& g = groups_[d];
    while (!g.ended && g.queue.size() <= kPrefetch) {
      auto b = g.stream->Next().value();
      if (!b) {
        g.ended = true;
        break;
      }
      EXPECT_TRUE(g.log->Record(g.produced++, b->lane, b->lane_batch_index, b->end).ok());
      g.queue.push_back(*std::move(b));
    }
    if (g.queue.empty()) return std::nullopt;
    Batch b = std::move(g.queue.front());
    g.queue.pop_front();
    ++g.taken;
    // Every reader released all but the batch it holds.
    EXPECT_TRUE(g.log->FoldBelow(g.taken - 1).ok());
    return b;
  }

  // One step: C/D batches from each group. False if any group ran out.
  bool Step(uint32_t lanes, std::multiset<Key>* step) {
    for (uint32_t d = 0; d < dp_degree_; ++d) {
      for (uint32_t i = 0; i < lanes / dp_degree_; ++i) {
        auto b = Take(d);
        if (!b) return false;
        step->insert(KeyOf(*b));
      }
    }
    return true;
  }

  // The merged, topology-free checkpoint: every group's progress after what it
  // took, ordered by lane.
  std::vector<proto::LaneProgress> Checkpoint() const {
    std::vector<proto::LaneProgress> merged;
    for (const Group& g : groups_) {
      auto p = g.log->ProgressAfter(g.taken);
      EXPECT_TRUE(p.ok()) << p.status();
      if (p.ok()) merged.insert(merged.end(), p->begin(), p->end());
    }
    std::sort(merged.begin(), merged.end(),
              [](const auto& a, const auto& b) { return a.lane() < b.lane(); });
    return merged;
  }

  uint64_t taken(uint32_t d) const { return groups_[d].taken; }

 private:
  struct Group {
    std::unique_ptr<GroupStream> stream;
    std::unique_ptr<daemon::ProgressLog> log;
    std::deque<Batch> queue;
    uint64_t produced = 0;
    uint64_t taken = 0;
    bool ended = false;
  };
  const uint32_t dp_degree_;
  std::vector<Group> groups_;
};

// The uninterrupted D = 1 run: its full steps (one batch from every lane) and each
// lane's batch count.
struct Reference {
  std::vector<std::multiset<Key>> steps;
  std::map<uint32_t, uint64_t> lane_batches;
};

Reference MakeReference(const proto::PipelineSpec& spec) {
  const uint32_t lanes = spec.canonical_replicas();
  auto stream =
      GroupStream::Create(ResolvePipeline(spec, 1).value(), Corpus(), OwnedLanes(lanes, 1, 0, proto::PipelineSpec::CONTIGUOUS).value())
          .value();
  Reference ref;
  std::vector<Batch> all;
  while (auto b = stream->Next().value()) {
    ++ref.lane_batches[b->lane];
    all.push_back(*std::move(b));
  }
  for (size_t s = 0; (s + 1) * lanes <= all.size(); ++s) {
    std::multiset<Key> step;
    std::set<uint32_t> seen;
    for (size_t i = s * lanes; i < (s + 1) * lanes; ++i) {
      step.insert(KeyOf(all[i]));
      seen.insert(all[i].lane);
    }
    if (seen.size() != lanes) break;
    ref.steps.push_back(std::move(step));
  }
  return ref;
}

std::vector<uint32_t> Divisors(uint32_t c) {
  std::vector<uint32_t> out;
  for (uint32_t d = 1; d <= c; ++d) {
    if (c % d == 0) out.push_back(d);
  }
  return out;
}

// Runs `steps` steps on `run` and compares them with reference steps from `first`.
void ExpectSteps(Topology* run, uint32_t lanes, const Reference& ref, size_t first, size_t steps,
                 const std::string& label) {
  for (size_t s = first; s < first + steps; ++s) {
    std::multiset<Key> step;
    ASSERT_TRUE(run->Step(lanes, &step)) << label << ": ran out at step " << s;
    ASSERT_TRUE(step == ref.steps[s]) << label << ": step " << s << " differs";
  }
}

// Checkpoint on every D dividing C after k steps, restore on every D', checkpoint
// again and restore on a third D'': every step matches the uninterrupted run.
void ExpectElasticResume(const proto::PipelineSpec& spec, const std::string& what) {
  constexpr size_t kSteps = 2;  // Per leg.
  const uint32_t lanes = spec.canonical_replicas();
  const Reference ref = MakeReference(spec);
  std::cout << what << ": " << ref.steps.size() << " full steps; batches per lane:";
  for (const auto& [lane, n] : ref.lane_batches) std::cout << " " << n;
  std::cout << "\n";
  const std::vector<uint32_t> divisors = Divisors(lanes);
  for (size_t i = 0; i < divisors.size(); ++i) {
    const uint32_t d = divisors[i];
    const size_t k = 1 + i % 3;  // Checkpoint after k steps.
    ASSERT_GE(ref.steps.size(), k + 2 * kSteps) << what << ": corpus too small";
    for (uint32_t d2 : divisors) {
      const uint32_t d3 = divisors[(i + d2) % divisors.size()];
      const std::string label =
          absl::StrCat(what, " D=", d, " k=", k, " -> D'=", d2, " -> D''=", d3);
      Topology first(spec, d, nullptr);
      ExpectSteps(&first, lanes, ref, 0, k, label);
      const auto checkpoint1 = first.Checkpoint();
      ASSERT_EQ(checkpoint1.size(), lanes) << label;
      for (const auto& p : checkpoint1) EXPECT_EQ(p.next_batch_index(), k) << label;

      Topology second(spec, d2, &checkpoint1);
      ExpectSteps(&second, lanes, ref, k, kSteps, label + " (first restore)");
      const auto checkpoint2 = second.Checkpoint();
      ASSERT_EQ(checkpoint2.size(), lanes) << label;

      Topology third(spec, d3, &checkpoint2);
      ExpectSteps(&third, lanes, ref, k + kSteps, kSteps, label + " (second restore)");
    }
  }
}

TEST(ElasticResumeTest, EveryStepAfterRestoreOnAnyDivisorMatchesTheUninterruptedRun) {
  for (uint32_t lanes : {4u, 6u, 8u}) {
    for (const char* mapping : {"contiguous", "interleaved"}) {
      ExpectElasticResume(Spec(lanes, mapping), absl::StrCat("C=", lanes, " ", mapping));
    }
  }
}

// The padding algorithms keep all their state (open bins, the candidate pool) inside a
// flush group, so a lane restored at {flush_group_chunk, records_into_group} replays
// that group's lengths into the same bins: the same guarantee as wrap.
TEST(ElasticResumeTest, EveryPackingAlgorithmResumesOnAnyDivisor) {
  for (const char* algorithm : {"first_fit", "best_fit", "best_fit_wrap"}) {
    for (uint32_t lanes : {4u, 6u}) {
      const char* mapping = lanes == 4 ? "contiguous" : "interleaved";
      const auto spec = Spec(lanes, mapping, "samples", algorithm);
      {  // Padding happened, so this is not wrap under another name.
        auto stream = GroupStream::Create(ResolvePipeline(spec, 1).value(), Corpus(),
                                          OwnedLanes(lanes, 1, 0, spec.mapping_strategy()).value())
                          .value();
        while (stream->Next().value().has_value()) {
        }
        EXPECT_GT(stream->PackingTotal().padding_cells, 0u) << algorithm;
      }
      ExpectElasticResume(spec, absl::StrCat(algorithm, " C=", lanes, " ", mapping));
    }
  }
}

// weight_by "tokens": the sample weights come from each dataset's measured tokens per
// sample, measured again by every restored topology; the steps after a restore on any
// divisor are still those of the uninterrupted run.
TEST(ElasticResumeTest, TokenWeightedMixtureResumesOnAnyDivisor) {
  constexpr uint32_t kLanes = 4;
  const auto spec = Spec(kLanes, "contiguous", "tokens");
  const Reference ref = MakeReference(spec);
  // The datasets' lengths differ (up to 13 and 23 tokens): another mixture than by samples.
  ASSERT_NE(ref.steps, MakeReference(Spec(kLanes, "contiguous")).steps);
  for (uint32_t d : Divisors(kLanes)) {
    for (uint32_t d2 : Divisors(kLanes)) {
      const std::string label = absl::StrCat("tokens D=", d, " -> D'=", d2);
      Topology first(spec, d, nullptr);
      ExpectSteps(&first, kLanes, ref, 0, 2, label);
      const auto checkpoint = first.Checkpoint();
      Topology second(spec, d2, &checkpoint);
      ExpectSteps(&second, kLanes, ref, 2, 3, label + " (restored)");
    }
  }
}

// The reordering operators keep their state inside a flush group too (the shuffle's
// buffer or blocks, ensure_mixture's buffer, the group's packed rows for a shuffle of
// rows), so a restored lane replays one group to the same order.
TEST(ElasticResumeTest, EveryReorderChainResumesOnAnyDivisor) {
  struct Chain {
    const char* label;
    const char* algorithm;  // The shuffle of samples' (operators[0]).
    int mixture_buffer;     // -1: no ensure_mixture; 0: exact mode.
    const char* rows;       // The shuffle of rows' algorithm; nullptr: none.
    const char* pack;
  };
  const Chain chains[] = {
      {"block_warmup + rows streaming", "block_warmup", -1, "streaming", "wrap"},
      {"ensure_mixture(4) + block", "block", 4, nullptr, "wrap"},
      {"exact ensure_mixture + best_fit + rows block", "", 0, "block", "best_fit"},
  };
  for (const Chain& chain : chains) {
    proto::PipelineSpec spec = Spec(6, "interleaved", "samples", chain.pack);
    auto* ops = spec.mutable_operators();
    ops->Mutable(0)->mutable_shuffle()->set_algorithm(chain.algorithm);
    if (chain.rows != nullptr) {
      proto::OperatorSpec rows;
      rows.mutable_shuffle()->set_buffer_size(4);
      rows.mutable_shuffle()->set_seed(8);
      rows.mutable_shuffle()->set_algorithm(chain.rows);
      *ops->Add() = ops->Get(2);  // batch moves to 3.
      *ops->Mutable(2) = rows;
    }
    if (chain.mixture_buffer >= 0) {
      proto::OperatorSpec mix;
      mix.mutable_ensure_mixture()->set_max_buffer_size(chain.mixture_buffer);
      ops->Add();
      for (int k = ops->size() - 1; k > 1; --k) ops->SwapElements(k, k - 1);
      *ops->Mutable(1) = mix;
    }
    ExpectElasticResume(ResolveSpec(spec, 1).value(), chain.label);
  }
}

TEST(ElasticResumeTest, CheckpointAtTheEndOfDataRestoresToNothing) {
  for (uint32_t lanes : {4u, 6u, 8u}) {
    const auto spec = Spec(lanes, "contiguous");
    const Reference ref = MakeReference(spec);
    for (uint32_t d : Divisors(lanes)) {
      Topology run(spec, d, nullptr);
      for (uint32_t g = 0; g < d; ++g) {
        while (run.Take(g).has_value()) {
        }
      }
      const auto at_end = run.Checkpoint();
      ASSERT_EQ(at_end.size(), lanes);
      for (const auto& p : at_end) {
        EXPECT_EQ(p.next_batch_index(), ref.lane_batches.at(p.lane()))
            << "C=" << lanes << " D=" << d << " lane " << p.lane();
      }
      for (uint32_t d2 : Divisors(lanes)) {
        Topology restored(spec, d2, &at_end);
        for (uint32_t g = 0; g < d2; ++g) {
          EXPECT_FALSE(restored.Take(g).has_value()) << "C=" << lanes << " D=" << d
                                                        << " D'=" << d2 << " group " << g;
        }
        // Checkpointing the empty resumed run gives the same progress back.
        const auto again = restored.Checkpoint();
        ASSERT_EQ(again.size(), at_end.size());
        for (size_t i = 0; i < again.size(); ++i) {
          EXPECT_EQ(again[i].SerializeAsString(), at_end[i].SerializeAsString());
        }
      }
    }
  }
}

// Same topology, checkpoint after any number of batches taken (mid-step, in the
// tail where lanes are running out, at the end): each group continues exactly, batch
// by batch, until its end.
void ExpectMidStepResume(const proto::PipelineSpec& spec) {
  const uint32_t lanes = spec.canonical_replicas();
  for (uint32_t d : Divisors(lanes)) {
    std::vector<std::vector<Key>> original(d);
    {
      Topology run(spec, d, nullptr);
      for (uint32_t g = 0; g < d; ++g) {
        while (auto b = run.Take(g)) original[g].push_back(KeyOf(*b));
      }
    }
    size_t longest = 0;
    for (const auto& o : original) longest = std::max(longest, o.size());
    for (size_t n = 0; n <= longest; n += 1 + n % 3) {  // Irregular stride.
      Topology run(spec, d, nullptr);
      for (uint32_t g = 0; g < d; ++g) {
        for (size_t i = 0; i < std::min(n, original[g].size()); ++i) {
          ASSERT_TRUE(run.Take(g).has_value());
        }
      }
      const auto checkpoint = run.Checkpoint();
      Topology restored(spec, d, &checkpoint);
      for (uint32_t g = 0; g < d; ++g) {
        const std::string label =
            absl::StrCat(spec.operators(1).pack_flat().algorithm(), " C=", lanes, " D=", d,
                         " group ", g, " checkpoint after ", n);
        for (size_t i = run.taken(g); i < original[g].size(); ++i) {
          auto b = restored.Take(g);
          ASSERT_TRUE(b.has_value()) << label << ": ran out at " << i;
          ASSERT_TRUE(KeyOf(*b) == original[g][i]) << label << ": batch " << i << " differs";
        }
        EXPECT_FALSE(restored.Take(g).has_value()) << label;
      }
    }
  }
}

TEST(ElasticResumeTest, MidStepCheckpointOnTheSameTopologyContinuesBatchByBatch) {
  for (uint32_t lanes : {4u, 6u, 8u}) ExpectMidStepResume(Spec(lanes, "interleaved"));
  for (const char* algorithm : {"first_fit", "best_fit", "best_fit_wrap"}) {
    ExpectMidStepResume(Spec(4, "interleaved", "samples", algorithm));
  }
}


// Issue 16: a checkpoint taken with microbatch_size 3 restores with another batch
// operator (2, and 5 with drop_last) on every D' dividing C. Positions are counted in
// records, so every lane continues from its record position: the rows it gave before
// the checkpoint and after are its records of an uninterrupted run, each once, in order,
// and lane batch indices continue from the checkpoint's. The steps after the restore
// are those of an uninterrupted run of the new size started at the same positions.
std::map<uint32_t, std::vector<std::vector<int32_t>>> RowsByLane(const std::vector<Batch>& batches) {
  std::map<uint32_t, std::vector<std::vector<int32_t>>> rows;
  for (const Batch& b : batches) {
    for (uint32_t r = 0; r < b.rows; ++r) {
      rows[b.lane].emplace_back(b.tokens.begin() + r * b.cols,
                                b.tokens.begin() + (r + 1) * b.cols);
    }
  }
  return rows;
}

proto::PipelineSpec WithBatch(proto::PipelineSpec spec, uint64_t microbatch, bool drop_last) {
  auto* batch = spec.mutable_operators(spec.operators_size() - 1)->mutable_batch();
  batch->set_microbatch_size(microbatch);
  batch->set_drop_last(drop_last);
  return ResolveSpec(spec, 1).value();
}

TEST(ElasticResumeTest, AnotherMicrobatchSizeContinuesEveryLaneFromItsRecordPosition) {
  constexpr uint32_t kLanes = 4;
  constexpr size_t kSteps = 2;
  const auto spec = Spec(kLanes, "interleaved");  // microbatch_size 3, drop_last false
  std::vector<Batch> records;
  {
    auto one = GroupStream::Create(ResolvePipeline(WithBatch(spec, 1, false), 1).value(),
                                   Corpus(), {0, 1, 2, 3}).value();
    while (auto b = one->Next().value()) records.push_back(*std::move(b));
  }
  const auto lane_records = RowsByLane(records);
  for (const auto& [microbatch, drop_last] : {std::pair<uint64_t, bool>{2, false}, {5, true}}) {
    const auto resumed_spec = WithBatch(spec, microbatch, drop_last);
    for (uint32_t d : Divisors(kLanes)) {
      Topology first(spec, d, nullptr);
      std::vector<Batch> before;
      for (size_t s = 0; s < kSteps; ++s) {
        for (uint32_t g = 0; g < d; ++g) {
          for (uint32_t i = 0; i < kLanes / d; ++i) before.push_back(first.Take(g).value());
        }
      }
      const auto checkpoint = first.Checkpoint();
      for (uint32_t d2 : Divisors(kLanes)) {
        const std::string label = absl::StrCat("microbatch 3 -> ", microbatch, " D=", d,
                                               " -> D'=", d2);
        // Steps equal those of D = 1 with the new size from the same positions.
        Topology reference(resumed_spec, 1, &checkpoint);
        Topology resumed(resumed_spec, d2, &checkpoint);
        for (size_t s = 0; s < 2; ++s) {
          std::multiset<Key> want, got;
          ASSERT_TRUE(reference.Step(kLanes, &want)) << label;
          ASSERT_TRUE(resumed.Step(kLanes, &got)) << label;
          ASSERT_TRUE(want == got) << label << ": step " << s << " after the restore";
        }
        // Every lane's rows: the records of the uninterrupted run, each once.
        Topology rest(resumed_spec, d2, &checkpoint);
        std::vector<Batch> all = before;
        std::map<uint32_t, uint64_t> first_index;
        for (uint32_t g = 0; g < d2; ++g) {
          while (auto b = rest.Take(g)) {
            first_index.emplace(b->lane, b->lane_batch_index);
            EXPECT_EQ(b->rows == microbatch || !drop_last, true) << label;
            all.push_back(*std::move(b));
          }
        }
        for (const auto& [lane, index] : first_index) EXPECT_EQ(index, kSteps) << label;
        std::stable_sort(all.begin(), all.end(), [](const Batch& a, const Batch& b) {
          return a.lane_batch_index < b.lane_batch_index;
        });
        const auto rows = RowsByLane(all);
        for (const auto& [lane, want] : lane_records) {
          const auto& got = rows.at(lane);
          if (!drop_last) {
            EXPECT_TRUE(got == want) << label << ": lane " << lane;
            continue;
          }
          // drop_last drops only the lane's final short batch.
          ASSERT_LE(got.size(), want.size()) << label;
          EXPECT_LT(want.size() - got.size(), microbatch) << label;
          EXPECT_TRUE(std::equal(got.begin(), got.end(), want.begin())) << label;
        }
      }
    }
  }
}

}  // namespace
}  // namespace zephon::pipeline
