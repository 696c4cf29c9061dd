#include "daemon/resolve_attach.h"

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/run_limits.h"
#include "daemon/pipeline/spec_string_form.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "shm/ring_layout.h"

namespace zephon::daemon {
namespace {

proto::AttachRequest Request(int64_t world = 1, int64_t rank = 0) {
  proto::AttachRequest r;
  r.set_ring_abi_major(shm::kLayoutMajor);
  *r.mutable_spec() = pipeline::testing::SpecOverDatasets({"web", "code"});
  r.mutable_spec()->add_operators()->mutable_pack_flat()->set_max_length(33);
  r.mutable_spec()->add_operators()->mutable_batch()->set_microbatch_size(3);
  if (world != 1) r.mutable_rank()->set_world_size(world);
  r.mutable_rank()->set_global_rank(rank);
  if (world > 1) {
    r.mutable_rank()->set_aggregate_dir("/tmp/agg");
    r.mutable_rank()->set_run_id("r1");
  }
  return r;
}

proto::CheckpointState Checkpoint(uint32_t lanes, const std::string& run_id = "r1") {
  proto::CheckpointState c;
  c.set_run_id(run_id);
  c.set_canonical_replicas(lanes);
  for (uint32_t l = 0; l < lanes; ++l) {
    proto::LaneProgress* p = c.add_lanes();
    p->set_lane(l);
    p->set_next_batch_index(10 + l);
  }
  return c;
}

absl::StatusOr<ResolvedAttach> Resolve(const proto::AttachRequest& request,
                                       const proto::CheckpointState* resume = nullptr) {
  return ResolveAttach(request, resume, AttachDefaults{});
}

TEST(ResolveAttachTest, FillsEveryDefault) {
  auto r = Resolve(Request());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->identity.world_size, 1u);
  EXPECT_EQ(r->identity.dp_degree, 1u);
  EXPECT_EQ(r->identity.canonical_replicas, 1u);  // = dp_degree
  EXPECT_EQ(r->pipeline.spec.canonical_replicas(), 1);
  EXPECT_EQ(r->pipeline.spec.format_version(), 1u);
  EXPECT_EQ(r->pipeline.spec.mapping_strategy(), proto::PipelineSpec::CONTIGUOUS);
  EXPECT_EQ(r->pipeline.spec.lane_routing(), proto::PipelineSpec::PERMUTE);
  EXPECT_EQ(r->pipeline.spec.flush_every_k_chunks(), 8u);
  EXPECT_EQ(r->pipeline.spec.work_source().exhausted_policy(), proto::WorkSourceSpec::STOP_AFTER_PASSES);
  EXPECT_EQ(r->pipeline.spec.work_source().stop_after_passes(), 1u);
  EXPECT_EQ(r->pipeline.spec.work_source().chunk_size(), 1024u);
  EXPECT_EQ(r->pipeline.spec.operators(0).pack_flat().algorithm(), "wrap");
  EXPECT_TRUE(r->pipeline.spec.operators(0).pack_flat().emit_positions());
  EXPECT_TRUE(r->pipeline.spec.operators(1).batch().drop_last());
  EXPECT_EQ(r->pipeline.lanes.num_lanes, 1u);
  EXPECT_EQ(r->pipeline.lanes.routing, proto::PipelineSpec::PERMUTE);
  EXPECT_EQ(r->pipeline.lanes.flush_every_k_chunks, 8u);
  EXPECT_EQ(r->pipeline.lanes.max_length, 33u);
  EXPECT_EQ(r->pipeline.lanes.microbatch_size, 3u);
  EXPECT_TRUE(r->pipeline.lanes.drop_last);
  EXPECT_EQ(r->owned_lanes, (std::vector<uint32_t>{0}));
  EXPECT_TRUE(r->lane_starts.empty());
  EXPECT_EQ(r->schema.rows, 3u);
  EXPECT_EQ(r->schema.cols, 33u);
  EXPECT_TRUE(r->schema.emit_positions);
  EXPECT_EQ(r->geometry.slot_count, 8u);  // AttachDefaults::default_prefetch_batches
  EXPECT_EQ(r->geometry.reader_capacity, 32u);
  EXPECT_EQ(r->geometry.slot_payload_bytes, r->schema.SlotPayloadBytes());
  EXPECT_EQ(r->limits.producer_timeout_ms, 5000u);
  EXPECT_EQ(r->limits.parallelism, exec::kDefaultParallelism);
  EXPECT_EQ(r->identity.local_peers, 1u);
  EXPECT_TRUE(r->identity.warnings.empty());
}

TEST(ResolveAttachTest, LaneCountComesFromTheSpecElseTheCheckpointElseDpDegree) {
  auto r = Resolve(Request(4, 2));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->identity.canonical_replicas, 4u);
  EXPECT_EQ(r->owned_lanes, (std::vector<uint32_t>{2}));

  const proto::CheckpointState saved = Checkpoint(8);
  r = Resolve(Request(4, 2), &saved);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->identity.canonical_replicas, 8u);
  EXPECT_EQ(r->pipeline.spec.canonical_replicas(), 8);
  EXPECT_EQ(r->owned_lanes, (std::vector<uint32_t>{4, 5}));
  ASSERT_EQ(r->lane_starts.size(), 2u);
  EXPECT_EQ(r->lane_starts[0].lane(), 4u);
  EXPECT_EQ(r->lane_starts[1].next_batch_index(), 15u);

  proto::AttachRequest explicit_lanes = Request(4, 2);
  explicit_lanes.mutable_spec()->set_canonical_replicas(8);
  r = Resolve(explicit_lanes, &saved);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->identity.canonical_replicas, 8u);
}

TEST(ResolveAttachTest, ExplicitOptionsAreKept) {
  proto::AttachRequest request = Request(2, 1);
  request.mutable_spec()->set_canonical_replicas(6);
  request.mutable_spec()->set_mapping_strategy(proto::PipelineSpec::INTERLEAVED);
  request.mutable_spec()->set_lane_routing(proto::PipelineSpec::MODULO);
  request.mutable_spec()->set_flush_every_k_chunks(3);
  request.mutable_spec()->mutable_operators(0)->mutable_pack_flat()->set_emit_positions(false);
  request.mutable_execution()->set_prefetch_batches(5);
  request.mutable_execution()->set_daemon_timeout_s(2);
  request.mutable_execution()->set_num_threads(6);
  auto r = Resolve(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->owned_lanes, (std::vector<uint32_t>{1, 3, 5}));
  EXPECT_EQ(r->pipeline.lanes.routing, proto::PipelineSpec::MODULO);
  EXPECT_EQ(r->pipeline.lanes.flush_every_k_chunks, 3u);
  EXPECT_FALSE(r->schema.emit_positions);
  EXPECT_EQ(r->geometry.slot_count, 8u);  // 5 rounded up to a power of two
  EXPECT_EQ(r->limits.producer_timeout_ms, 2000u);
  EXPECT_EQ(r->limits.parallelism, 6u);
}

TEST(ResolveAttachTest, OptionsSentAsStringsByAnOlderClientAreRead) {
  // An older client's binary spec: the options as strings at the numbers they had.
  proto::AttachRequest request = Request(2, 1);
  request.mutable_spec()->set_canonical_replicas(4);
  request.mutable_spec()->set_mapping_strategy(proto::PipelineSpec::INTERLEAVED);
  request.mutable_spec()->set_lane_routing(proto::PipelineSpec::MODULO);
  request.mutable_spec()->mutable_work_source()->set_exhausted_policy(
      proto::WorkSourceSpec::REPEAT);
  const std::string old_bytes = pipeline::ToStringForm(request.spec()).SerializeAsString();
  ASSERT_TRUE(request.mutable_spec()->ParseFromString(old_bytes));
  ASSERT_EQ(request.spec().mapping_strategy(), proto::PipelineSpec::MAPPING_STRATEGY_UNSPECIFIED);
  auto r = Resolve(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->pipeline.spec.mapping_strategy(), proto::PipelineSpec::INTERLEAVED);
  EXPECT_EQ(r->owned_lanes, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(r->pipeline.lanes.routing, proto::PipelineSpec::MODULO);
  EXPECT_EQ(r->pipeline.spec.work_source().exhausted_policy(), proto::WorkSourceSpec::REPEAT);
  // A string this build does not know is refused, naming the option.
  proto::PipelineSpecStringForm bad = pipeline::ToStringForm(request.spec());
  bad.set_lane_routing("sideways");
  ASSERT_TRUE(request.mutable_spec()->ParseFromString(bad.SerializeAsString()));
  auto refused = Resolve(request);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("lane_routing 'sideways' unknown"), std::string::npos)
      << refused.status();
}

TEST(ResolveAttachTest, SlotSizeIsTheSchemaOfTheOperatorList) {
  struct Case {
    uint64_t max_length, microbatch;
    bool shuffle, positions;
  };
  for (const Case& c : {Case{33, 3, false, true}, Case{2, 1, false, false},
                        Case{4097, 8, true, true}, Case{129, 5, true, false}}) {
    proto::AttachRequest request = Request();
    proto::PipelineSpec& spec = *request.mutable_spec();
    spec.clear_operators();
    if (c.shuffle) spec.add_operators()->mutable_shuffle()->set_buffer_size(16);
    proto::PackFlatSpec* pack = spec.add_operators()->mutable_pack_flat();
    pack->set_max_length(c.max_length);
    pack->set_emit_positions(c.positions);
    spec.add_operators()->mutable_batch()->set_microbatch_size(c.microbatch);
    auto r = Resolve(request);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->schema.rows, c.microbatch);
    EXPECT_EQ(r->schema.cols, c.max_length);
    EXPECT_EQ(r->schema.emit_positions, c.positions);
    uint64_t expected = 0;
    for (const TensorSchema& t : r->schema.Tensors()) {
      uint64_t bytes = shm::DTypeSize(t.dtype);
      for (uint64_t d : t.max_shape) bytes *= d;
      expected = shm::RoundUp(expected, shm::kTensorAlignment) + bytes;
    }
    EXPECT_EQ(r->geometry.slot_payload_bytes, expected) << c.max_length << "x" << c.microbatch;
  }
}

TEST(ResolveAttachTest, UnevenLanesWarn) {
  proto::AttachRequest request = Request(3, 0);
  request.mutable_spec()->set_canonical_replicas(8);
  auto r = Resolve(request);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->identity.warnings.size(), 1u);
  EXPECT_NE(r->identity.warnings[0].find("canonical_replicas=8 is not divisible by dp_degree=3"),
            std::string::npos);
}

TEST(ResolveAttachTest, AutoLocalPeersAreCappedAtTheReadersPerInstance) {
  auto r = ResolveAttach(Request(8, 0), nullptr, AttachDefaults{4, 8});
  ASSERT_TRUE(r.ok()) << r.status();
  proto::AttachRequest dp1 = Request(8, 0);
  dp1.mutable_rank()->set_dp_degree(1);
  r = ResolveAttach(dp1, nullptr, AttachDefaults{4, 8});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->identity.local_peers, 4u);
  EXPECT_EQ(r->geometry.reader_capacity, 4u);
}

TEST(ResolveAttachTest, ACheckpointOfAnotherRunIdMayBeRestored) {
  // A restarted job given a new run_id, or a run forked from another, continues the
  // stream; the registry records the old run in the new run's lineage.
  const proto::CheckpointState other = Checkpoint(2, "other");
  proto::AttachRequest r = Request(2, 0);
  r.mutable_spec()->set_canonical_replicas(2);
  absl::StatusOr<ResolvedAttach> resolved = Resolve(r, &other);
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  EXPECT_NE(resolved->identity.run_id, "other");
}

struct BadCase {
  const char* what;
  proto::AttachRequest request;
  const proto::CheckpointState* resume;
  absl::StatusCode code;
  std::string must_mention;
};

TEST(ResolveAttachTest, EveryViolationNamesTheOptionAndValues) {
  static const proto::CheckpointState kEight = Checkpoint(8);
  static proto::CheckpointState kShort = [] {
    proto::CheckpointState c = Checkpoint(4);
    c.mutable_lanes()->RemoveLast();
    return c;
  }();
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  const auto kPrecondition = absl::StatusCode::kFailedPrecondition;
  std::vector<BadCase> cases;
  {
    proto::AttachRequest r = Request();
    r.set_ring_abi_major(shm::kLayoutMajor + 1);
    cases.push_back({"abi", r, nullptr, kPrecondition, "ring ABI major version"});
  }
  {
    proto::AttachRequest r = Request();
    r.mutable_execution()->set_prefetch_batches(5000);
    cases.push_back({"prefetch", r, nullptr, kInvalid, "prefetch_batches=5000 is too large"});
  }
  {
    proto::AttachRequest r = Request();
    r.mutable_rank()->set_world_size(0);
    cases.push_back({"rank", r, nullptr, kInvalid, "world_size=0"});
  }
  {
    proto::AttachRequest r = Request();
    r.mutable_spec()->set_canonical_replicas(0);
    cases.push_back({"explicit canonical 0", r, nullptr, kInvalid,
                     "canonical_replicas=0 is invalid: expected 1 <= canonical_replicas <= "
                     "65536 (leave it unset to use the initial dp_degree)"});
    r.mutable_spec()->set_canonical_replicas(kMaxCanonicalReplicas + 1);
    cases.push_back({"canonical over the bound", r, nullptr, kInvalid,
                     "canonical_replicas=65537 is invalid"});
    // 2^32 + 2 must be refused, never truncated to 2.
    r.mutable_spec()->set_canonical_replicas((int64_t{1} << 32) + 2);
    cases.push_back({"canonical over 32 bits", r, nullptr, kInvalid,
                     "canonical_replicas=4294967298 is invalid"});
  }
  {
    proto::AttachRequest r = Request(4, 0);
    r.mutable_spec()->set_canonical_replicas(2);
    cases.push_back({"dp > C", r, nullptr, kInvalid,
                     "dp_degree=4 exceeds canonical_replicas=2: a run has at most"});
  }
  {
    // Unset canonical_replicas defaults to dp_degree, which the lane bound also limits.
    proto::AttachRequest r = Request(kMaxWorldSize, 0);
    cases.push_back({"default canonical over the bound", r, nullptr, kInvalid,
                     "dp_degree=131072 exceeds zephond's bound of 65536"});
  }
  {
    proto::AttachRequest r = Request(4, 0);
    r.mutable_spec()->set_canonical_replicas(4);
    cases.push_back({"resume with other lanes", r, &kEight, kPrecondition,
                     "canonical_replicas=4 but the checkpoint was taken with "
                     "canonical_replicas=8"});
  }
  cases.push_back({"checkpoint lacks a lane", Request(4, 3), &kShort,
                   absl::StatusCode::kDataLoss, "the checkpoint has no progress for lane 3"});
  {
    proto::AttachRequest r = Request(64, 0);
    r.mutable_rank()->set_dp_degree(1);
    r.mutable_rank()->set_local_peers(64);
    cases.push_back({"local_peers", r, nullptr, kInvalid,
                     "local_peers=64 exceeds this zephond's 32 readers per instance"});
  }
  {
    proto::AttachRequest r = Request();
    r.mutable_spec()->mutable_operators(0)->mutable_pack_flat()->set_max_length(1);
    cases.push_back({"operators", r, nullptr, kInvalid,
                     "operators[0] pack_flat.max_length must be >= 2, got 1"});
  }
  {
    proto::AttachRequest r = Request();
    r.mutable_spec()->set_mapping_strategy(static_cast<proto::PipelineSpec::MappingStrategy>(7));
    cases.push_back({"mapping", r, nullptr, kInvalid, "mapping_strategy 7 unknown"});
  }
  for (const BadCase& c : cases) {
    auto r = Resolve(c.request, c.resume);
    ASSERT_FALSE(r.ok()) << c.what;
    EXPECT_EQ(r.status().code(), c.code) << c.what << ": " << r.status();
    EXPECT_NE(r.status().message().find(c.must_mention), std::string::npos)
        << c.what << ": " << r.status().message();
  }
}

}  // namespace
}  // namespace zephon::daemon
