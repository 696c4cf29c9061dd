// testdata/pre_enum_checkpoint.zckpt was written by the code that kept mapping_strategy,
// lane_routing and exhausted_policy as strings: a spec of interleaved / modulo / repeat
// over testing::MakeSyntheticDataset("web", 1, 2, 10, 5), resolved for dp_degree 2.
// Restore compares spec hashes, so the hash of the spec read back must still be the one
// stored; `zephonctl checkpoint inspect` shows the spec, so its options must read back.
#include <string>

#include "common/file_io.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "gtest/gtest.h"

namespace zephon::checkpoint {
namespace {

proto::CheckpointState Fixture() {
  auto bytes = ReadFile("daemon/checkpoint/testdata/pre_enum_checkpoint.zckpt");
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  auto state = DecodeCheckpoint(*bytes);
  EXPECT_TRUE(state.ok()) << state.status();
  return *state;
}

TEST(PreEnumCheckpointTest, SpecHashStillMatches) {
  const proto::CheckpointState state = Fixture();
  auto data = pipeline::testing::MakeSyntheticDataset("web", 1, 2, 10, 5);
  EXPECT_EQ(state.spec_hash(), "4e201eadf8cb9ab6");
  EXPECT_EQ(pipeline::SpecHash(state.spec(), {data}), state.spec_hash());
  // Resolving the stored spec again changes nothing the hash covers.
  EXPECT_EQ(pipeline::SpecHash(pipeline::ResolveSpec(state.spec(), 2).value(), {data}),
            state.spec_hash());
}

TEST(PreEnumCheckpointTest, OptionsReadBack) {
  const proto::CheckpointState state = Fixture();
  EXPECT_EQ(state.spec().mapping_strategy(), proto::PipelineSpec::INTERLEAVED);
  EXPECT_EQ(state.spec().lane_routing(), proto::PipelineSpec::MODULO);
  EXPECT_EQ(state.spec().work_source().exhausted_policy(), proto::WorkSourceSpec::REPEAT);
}

}  // namespace
}  // namespace zephon::checkpoint
