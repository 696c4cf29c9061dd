#include "daemon/checkpoint/spec_change.h"

#include <gtest/gtest.h>

#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/spec.h"

namespace zephon::checkpoint {
namespace {

// Whether `text` holds `part` (gtest without gmock's matchers).
::testing::AssertionResult Holds(absl::string_view text, absl::string_view part) {
  if (text.find(part) != absl::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" lacks \"" << part << "\"";
}

std::vector<std::shared_ptr<const pipeline::Dataset>> Corpus() {
  return {pipeline::testing::MakeSyntheticDataset("web", 1, 2, 20, 13)};
}

proto::PipelineSpec Spec() {
  proto::PipelineSpec spec = pipeline::testing::SpecOverDatasets({"web"});
  spec.mutable_work_source()->set_seed(5);
  spec.mutable_work_source()->set_chunk_size(4);
  auto* pack = spec.add_operators()->mutable_pack_flat();
  pack->set_max_length(33);
  auto* batch = spec.add_operators()->mutable_batch();
  batch->set_microbatch_size(4);
  spec.set_canonical_replicas(4);
  spec.set_flush_every_k_chunks(2);
  return pipeline::ResolveSpec(spec, 1).value();
}

proto::CheckpointState Saved(const proto::PipelineSpec& spec) {
  proto::CheckpointState state;
  *state.mutable_spec() = spec;
  state.set_spec_hash(pipeline::SpecHash(spec, Corpus()));
  return state;
}

absl::StatusOr<ResumedSpecChanges> Check(const proto::CheckpointState& saved,
                                         const proto::PipelineSpec& now) {
  return CheckResumedSpec(saved, now, pipeline::SpecHash(now, Corpus()), Corpus());
}

TEST(SpecChangeTest, TheSameSpecChangesNothing) {
  auto changes = Check(Saved(Spec()), Spec());
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_FALSE(changes->batch);
  EXPECT_EQ(changes->saved_flush_every_k_chunks, 0u);
}

TEST(SpecChangeTest, MicrobatchSizeAndDropLastMayChange) {
  proto::PipelineSpec now = Spec();
  now.mutable_operators(1)->mutable_batch()->set_microbatch_size(2);
  ASSERT_NE(pipeline::SpecHash(now, Corpus()), Saved(Spec()).spec_hash());
  auto changes = Check(Saved(Spec()), now);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_TRUE(changes->batch);
  EXPECT_EQ(changes->saved_flush_every_k_chunks, 0u);

  now.mutable_operators(1)->mutable_batch()->set_drop_last(false);
  changes = Check(Saved(Spec()), now);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_TRUE(changes->batch);
}

TEST(SpecChangeTest, MappingStrategyMayChangeAndIsReported) {
  proto::PipelineSpec now = Spec();
  now.set_mapping_strategy(proto::PipelineSpec::INTERLEAVED);
  ASSERT_NE(pipeline::SpecHash(now, Corpus()), Saved(Spec()).spec_hash());
  auto changes = Check(Saved(Spec()), now);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_TRUE(changes->mapping);
  EXPECT_FALSE(changes->batch);
  // lane_routing decides what each lane yields: still refused, named.
  now.set_lane_routing(proto::PipelineSpec::MODULO);
  changes = Check(Saved(Spec()), now);
  ASSERT_FALSE(changes.ok());
  EXPECT_TRUE(Holds(changes.status().message(), "lane_routing"));
}

TEST(SpecChangeTest, WithBatchingOfRevertsOnlyTheBatchOperatorAndFlushGrouping) {
  proto::PipelineSpec now = Spec();
  now.mutable_operators(1)->mutable_batch()->set_microbatch_size(2);
  now.set_flush_every_k_chunks(4);
  now.mutable_work_source()->set_seed(6);  // not batching: kept
  const proto::PipelineSpec reverted = WithBatchingOf(now, Spec());
  EXPECT_EQ(reverted.operators(1).batch().microbatch_size(), 4u);
  EXPECT_EQ(reverted.flush_every_k_chunks(), 2u);
  EXPECT_EQ(reverted.work_source().seed(), 6u);
  now.mutable_work_source()->set_seed(5);
  EXPECT_EQ(pipeline::SpecHash(WithBatchingOf(now, Spec()), Corpus()),
            Saved(Spec()).spec_hash());
}

TEST(SpecChangeTest, FieldsSpelledDifferentlyThatHashAlikeAreNoDifference) {
  // A checkpoint from before weight_by existed stores it unset; today's resolve says
  // SAMPLES. The hash treats them alike, so a microbatch change still resumes.
  proto::PipelineSpec old_spec = Spec();
  old_spec.mutable_work_source()->clear_weight_by();
  proto::PipelineSpec now = Spec();
  now.mutable_work_source()->set_weight_by(proto::WorkSourceSpec::SAMPLES);
  now.mutable_operators(1)->mutable_batch()->set_microbatch_size(2);
  auto changes = Check(Saved(old_spec), now);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_TRUE(changes->batch);
}

TEST(SpecChangeTest, FlushEveryKChunksIsReportedForRegrouping) {
  proto::PipelineSpec now = Spec();
  now.set_flush_every_k_chunks(4);
  now.mutable_operators(1)->mutable_batch()->set_microbatch_size(8);
  auto changes = Check(Saved(Spec()), now);
  ASSERT_TRUE(changes.ok()) << changes.status();
  EXPECT_TRUE(changes->batch);
  EXPECT_EQ(changes->saved_flush_every_k_chunks, 2u);
}

TEST(SpecChangeTest, ARefusalNamesTheFirstDataDefiningField) {
  proto::PipelineSpec now = Spec();
  now.mutable_work_source()->set_seed(99);
  auto refused = Check(Saved(Spec()), now);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Holds(refused.status().message(), "spec hash"));
  EXPECT_TRUE(Holds(refused.status().message(), "work_source.seed: 5 in the checkpoint, 99 now"));

  // A change the restore allows does not hide one it does not.
  now = Spec();
  now.mutable_operators(1)->mutable_batch()->set_microbatch_size(2);
  now.mutable_operators(0)->mutable_pack_flat()->set_max_length(65);
  refused = Check(Saved(Spec()), now);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Holds(refused.status().message(), "operators[0].pack_flat.max_length: 33 in the checkpoint, 65 now"));
  EXPECT_TRUE(Holds(refused.status().message(), "which samples each lane yields"));

  now = Spec();
  now.add_operators()->mutable_shuffle()->set_buffer_size(8);
  refused = Check(Saved(Spec()), now);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Holds(refused.status().message(), "operators: 2 entries in the checkpoint, 3 now"));
}

TEST(SpecChangeTest, OtherFilesAreNamedWhenNoFieldDiffers) {
  const proto::CheckpointState saved = Saved(Spec());
  const std::vector<std::shared_ptr<const pipeline::Dataset>> other = {
      pipeline::testing::MakeSyntheticDataset("web", 1, 2, 21, 13)};
  proto::PipelineSpec now = Spec();
  now.mutable_operators(1)->mutable_batch()->set_microbatch_size(2);
  auto refused = CheckResumedSpec(saved, now, pipeline::SpecHash(now, other), other);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(Holds(refused.status().message(), "the datasets' files differ"));
}

TEST(SpecChangeTest, DifferenceWalksFieldsInOrderAndIgnoresLocations) {
  proto::PipelineSpec a = Spec();
  proto::PipelineSpec b = Spec();
  b.mutable_work_source()->mutable_datasets(0)->set_path("/elsewhere");
  EXPECT_EQ(FirstSpecDifference(a, b), "");
  // Presence: an unset optional is "unset", not its default value.
  b.mutable_operators(0)->mutable_pack_flat()->set_pad_token_id(0);
  EXPECT_EQ(FirstSpecDifference(a, b),
            "operators[0].pack_flat.pad_token_id: unset in the checkpoint, 0 now");
  b.set_format_version(7);
  EXPECT_EQ(FirstSpecDifference(a, b), "format_version: 1 in the checkpoint, 7 now");
  b = Spec();
  b.mutable_work_source()->mutable_datasets(0)->set_name("code");
  EXPECT_EQ(FirstSpecDifference(a, b),
            "work_source.datasets[0].name: \"web\" in the checkpoint, \"code\" now");
}

}  // namespace
}  // namespace zephon::checkpoint
