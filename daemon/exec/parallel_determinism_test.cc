// The engine's execution promise: the batches of a group are the same bytes whether
// they are materialized inline, by GroupStream::Next, or on 4 pool threads that finish
// in random order.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "daemon/exec/ordered_stage.h"
#include "daemon/exec/parallel_batches.h"
#include "daemon/exec/worker_pool.h"
#include "daemon/pipeline/batching/group_stream.h"
#include "daemon/pipeline/batching/lane_stream.h"
#include "daemon/pipeline/ordering/lanes.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/formats/testing_corpus.h"

namespace zephon::exec {
namespace {

using pipeline::Batch;
using pipeline::GroupStream;

constexpr int kBatches = 200;

proto::PipelineSpec Spec() {
  proto::PipelineSpec spec = pipeline::testing::SpecOverDatasets({"web", "code"});
  auto* ws = spec.mutable_work_source();
  ws->add_weights(0.7);
  ws->add_weights(0.3);
  ws->set_seed(99);
  ws->set_chunk_size(16);
  ws->set_shuffle_shards(true);
  ws->set_shuffle_within_shard(true);
  ws->set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  auto* shuffle = spec.add_operators()->mutable_shuffle();
  shuffle->set_buffer_size(32);
  shuffle->set_seed(5);
  spec.add_operators()->mutable_pack_flat()->set_max_length(65);
  spec.add_operators()->mutable_batch()->set_microbatch_size(4);
  spec.set_canonical_replicas(4);
  spec.set_flush_every_k_chunks(2);
  return pipeline::ResolveSpec(spec, 2).value();
}

std::unique_ptr<GroupStream> Group() {
  const proto::PipelineSpec spec = Spec();
  auto lanes = pipeline::OwnedLanes(4, 2, 1, spec.mapping_strategy());
  std::vector<std::shared_ptr<const pipeline::Dataset>> corpus = {
      pipeline::testing::MakeSyntheticDataset("web", 1, 4, 60, 90),
      pipeline::testing::MakeSyntheticDataset("code", 2, 3, 40, 150)};
  return GroupStream::Create(pipeline::ResolvePipeline(spec, 1).value(), corpus, lanes.value()).value();
}

template <typename V>
void AppendBytes(const V& v, std::string* out) {
  out->append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(v[0]));
}

// Every field of a batch as bytes.
std::string Bytes(const Batch& b) {
  std::string out;
  const uint64_t head[] = {b.lane, b.lane_batch_index, b.rows, b.cols, b.start.flush_group_chunk,
                           b.start.records_into_group};
  out.append(reinterpret_cast<const char*>(head), sizeof(head));
  AppendBytes(b.tokens, &out);
  AppendBytes(b.positions, &out);
  for (const auto& id : b.sample_ids) {
    const uint64_t triple[] = {id.dataset, id.shard, id.index};
    out.append(reinterpret_cast<const char*>(triple), sizeof(triple));
  }
  return out;
}

std::vector<std::string> ViaParallelBatches(std::shared_ptr<WorkerPool> pool,
                                            uint32_t parallelism) {
  auto batches = ParallelBatches::Create(Group(), pool, {parallelism, 0}).value();
  EXPECT_EQ(batches->parallelism(), parallelism);
  std::vector<std::string> out;
  while (out.size() < kBatches) {
    absl::StatusOr<std::optional<Batch>> b = batches->Next(absl::Now() + absl::Seconds(30));
    EXPECT_TRUE(b.ok()) << b.status();
    if (!b.ok() || !b->has_value()) break;
    out.push_back(Bytes(**b));
  }
  return out;
}

TEST(ParallelDeterminismTest, OneAndFourThreadsGiveIdenticalBytes) {
  std::vector<std::string> reference;
  auto group = Group();
  while (reference.size() < kBatches) reference.push_back(Bytes(group->Next().value().value()));

  std::shared_ptr<WorkerPool> pool = WorkerPool::Create(4).value();
  const std::vector<std::string> one = ViaParallelBatches(pool, 1);
  const std::vector<std::string> four = ViaParallelBatches(pool, 4);
  ASSERT_EQ(one.size(), static_cast<size_t>(kBatches));
  ASSERT_EQ(four.size(), static_cast<size_t>(kBatches));
  for (int i = 0; i < kBatches; ++i) {
    EXPECT_EQ(one[i], reference[i]) << "batch " << i;
    EXPECT_EQ(four[i], reference[i]) << "batch " << i;
  }
}

TEST(ParallelDeterminismTest, RandomFinishOrderStillGivesIdenticalBytes) {
  // Materialize the plans ourselves with random delays, so later batches often finish
  // first; the ordered stage must still hand them out in plan order.
  auto planner = Group();
  auto reference = Group();
  std::shared_ptr<WorkerPool> pool = WorkerPool::Create(4).value();
  auto stage = OrderedStage<Batch>::Create(pool, {4, 6}).value();
  std::mt19937 rng(7);
  int taken = 0;
  auto take_one = [&] {
    Batch b = stage->Take(absl::Now() + absl::Seconds(30)).value();
    EXPECT_EQ(Bytes(b), Bytes(reference->Next().value().value())) << "batch " << taken;
    ++taken;
  };
  for (int i = 0; i < kBatches; ++i) {
    while (!stage->HasRoom()) take_one();
    pipeline::BatchPlan plan = planner->NextPlan().value().value();
    const int delay_us = static_cast<int>(rng() % 400);
    ASSERT_TRUE(stage
                    ->Submit(
                        [source = planner->source(), plan, delay_us] {
                          absl::SleepFor(absl::Microseconds(delay_us));
                          return pipeline::Materialize(plan, source->datasets());
                        },
                        absl::Now() + absl::Seconds(30))
                    .ok());
  }
  while (stage->outstanding() > 0) take_one();
  EXPECT_EQ(taken, kBatches);
  EXPECT_LE(stage->stats().peak_buffered, 6u);
}

TEST(ParallelDeterminismTest, AForeignPlanFailsToMaterializeWithInternal) {
  auto group = Group();
  pipeline::BatchPlan plan = group->NextPlan().value().value();
  plan.segments.back().count += 1000000;
  EXPECT_TRUE(absl::IsInternal(
      pipeline::Materialize(plan, group->source()->datasets()).status()));
  plan.segments.pop_back();
  EXPECT_TRUE(absl::IsInternal(
      pipeline::Materialize(plan, group->source()->datasets()).status()));
}

}  // namespace
}  // namespace zephon::exec
