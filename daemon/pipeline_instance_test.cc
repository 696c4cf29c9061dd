// PipelineInstance end to end through its ring: instances that share one worker pool
// publish the same bytes whatever their materialize parallelism.
#include "daemon/pipeline_instance.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/exec/worker_pool.h"
#include "daemon/instance_registry.h"
#include "daemon/pipeline/batching/group_stream.h"
#include "daemon/pipeline/ordering/lanes.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "shm/ring_reader.h"

namespace zephon::daemon {
namespace {

constexpr int kBatches = 120;

proto::PipelineSpec Spec() {
  proto::PipelineSpec spec = pipeline::testing::SpecOverDatasets({"web", "code"});
  auto* ws = spec.mutable_work_source();
  ws->set_seed(3);
  ws->set_chunk_size(8);
  ws->set_shuffle_within_shard(true);
  ws->set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  spec.add_operators()->mutable_pack_flat()->set_max_length(33);
  spec.add_operators()->mutable_batch()->set_microbatch_size(3);
  spec.set_canonical_replicas(2);
  return pipeline::ResolveSpec(spec, 1).value();
}

std::string UniqueShmName() {
  static std::atomic<int> n{0};
  return absl::StrCat("zephon-test.", getpid(), ".instance.", n.fetch_add(1));
}

std::unique_ptr<PipelineInstance> MakeInstance(std::shared_ptr<exec::WorkerPool> pool,
                                               uint32_t parallelism) {
  const proto::PipelineSpec spec = Spec();
  std::vector<std::shared_ptr<const pipeline::Dataset>> corpus = {
      pipeline::testing::MakeSyntheticDataset("web", 1, 2, 50, 70),
      pipeline::testing::MakeSyntheticDataset("code", 2, 2, 30, 40)};
  auto stream = pipeline::GroupStream::Create(pipeline::ResolvePipeline(spec, 1).value(), corpus, {0, 1}).value();
  InstanceConfig config;
  config.instance_id = absl::StrCat("test/p", parallelism);
  config.spec = spec;
  config.owned_lanes = {0, 1};
  config.shm_name = UniqueShmName();
  config.geometry.slot_count = 4;
  config.schema = BatchSchema::Of(pipeline::LaneOptions::FromSpec(spec).value());
  config.geometry.slot_payload_bytes = config.schema.SlotPayloadBytes();
  config.geometry.reader_capacity = 2;
  config.explain_stream = stream->Explain();
  config.materialize.parallelism = parallelism;
  auto instance = PipelineInstance::Create(std::move(config), std::move(stream), pool);
  EXPECT_TRUE(instance.ok()) << instance.status();
  return *std::move(instance);
}

// The bytes of every tensor of the first kBatches slots, plus lane and index.
std::vector<std::string> ReadRing(PipelineInstance* instance) {
  proto::AttachReply reply;
  EXPECT_TRUE(instance->AttachReader(0, getpid(), &reply).ok());
  auto fds = instance->ReaderFds();
  EXPECT_TRUE(fds.ok()) << fds.status();
  auto reader = shm::RingReader::Open(*std::move(fds), reply.ring_name(), reply.reader_index(),
                                      reply.lease_epoch(), reply.ring_generation(),
                                      absl::Seconds(30));
  EXPECT_TRUE(reader.ok()) << reader.status();
  std::vector<std::string> out;
  while (reader.ok() && out.size() < kBatches) {
    absl::StatusOr<shm::SlotView> slot = (*reader)->Acquire(absl::Seconds(30));
    if (!slot.ok()) {
      ADD_FAILURE() << slot.status();
      break;
    }
    std::string bytes = absl::StrCat(slot->lane, "/", slot->lane_batch_index, ":");
    for (const shm::TensorView& t : slot->tensors) {
      absl::StrAppend(&bytes, t.name, "=");
      bytes.append(static_cast<const char*>(t.data), t.bytes);
    }
    out.push_back(std::move(bytes));
    EXPECT_TRUE((*reader)->Release(slot->seq).ok());
  }
  return out;
}

TEST(PipelineInstanceTest, RingBytesDoNotDependOnParallelism) {
  std::shared_ptr<exec::WorkerPool> pool = exec::WorkerPool::Create(4).value();
  auto inline_instance = MakeInstance(pool, 1);
  auto parallel_instance = MakeInstance(pool, 4);
  EXPECT_EQ(inline_instance->parallelism(), 1u);
  EXPECT_EQ(parallel_instance->parallelism(), 4u);
  const std::vector<std::string> one = ReadRing(inline_instance.get());
  const std::vector<std::string> four = ReadRing(parallel_instance.get());
  ASSERT_EQ(one.size(), static_cast<size_t>(kBatches));
  EXPECT_TRUE(one == four);
  EXPECT_NE(one[0].find("positions="), std::string::npos);

  const std::string explain = parallel_instance->Explain();
  EXPECT_EQ(explain.rfind("instance test/p4\n", 0), 0u) << explain;
  for (const char* part : {"work source:", "lanes: 0,1 of 2", "pack_flat(max_length=33",
                           "materialize: parallelism=4", "queue_capacity=8", "ring: ",
                           "slots=4", "threads: 1 producer"}) {
    EXPECT_NE(explain.find(part), std::string::npos) << part << " in\n" << explain;
  }
  // Destroyed while its producer waits on a full ring and tasks may be in flight.
  const absl::Time t0 = absl::Now();
  parallel_instance.reset();
  inline_instance.reset();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
}

TEST(InstanceRegistryTest, NodeTotalsCountTheSharedPoolOnce) {
  RegistryOptions options;
  options.shm_prefix = absl::StrCat("zephon-test.", getpid(), ".registry");
  options.worker_pool = exec::WorkerPool::Create(3).value();
  InstanceRegistry registry(options);
  const std::string text = registry.Explain("").value();
  EXPECT_NE(text.find("node totals: instances=0 producer_threads=0 worker_threads=3"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("total_threads=3"), std::string::npos) << text;
}

TEST(InstanceRegistryTest, NumThreadsIsValidated) {
  proto::ExecutionOptions execution;
  EXPECT_EQ(ValidateExecution(execution).value().parallelism, exec::kDefaultParallelism);
  execution.set_num_threads(6);
  EXPECT_EQ(ValidateExecution(execution).value().parallelism, 6u);
  execution.set_num_threads(exec::kMaxWorkerThreads + 1);
  EXPECT_TRUE(absl::IsInvalidArgument(ValidateExecution(execution).status()));
}

}  // namespace
}  // namespace zephon::daemon
