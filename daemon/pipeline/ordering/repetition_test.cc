#include "daemon/pipeline/ordering/repetition.h"

#include <gtest/gtest.h>

namespace zephon::pipeline {
namespace {

proto::WorkSourceSpec Spec(proto::WorkSourceSpec::ExhaustedPolicy policy) {
  proto::WorkSourceSpec spec;
  for (const char* n : {"web", "code"}) spec.add_datasets()->set_name(n);
  spec.set_exhausted_policy(policy);
  spec.set_stop_after_passes(2);
  return spec;
}

TEST(RepetitionTest, DatasetFieldsOverrideTheWorkSourceDefaults) {
  auto spec = Spec(proto::WorkSourceSpec::STOP_AFTER_PASSES);
  auto reps = ResolveRepetition(spec);
  ASSERT_TRUE(reps.ok()) << reps.status();
  EXPECT_EQ((*reps)[0].policy, proto::WorkSourceSpec::STOP_AFTER_PASSES);
  EXPECT_EQ((*reps)[0].passes, 2u);
  EXPECT_TRUE((*reps)[0].reshuffle);
  spec.mutable_datasets(0)->set_exhausted_policy(proto::WorkSourceSpec::REPEAT);
  spec.mutable_datasets(0)->set_max_repeats(3);
  spec.mutable_datasets(1)->set_stop_after_passes(5);
  spec.set_reshuffle_on_repeat(false);
  spec.mutable_datasets(1)->set_reshuffle_on_repeat(true);
  reps = ResolveRepetition(spec);
  ASSERT_TRUE(reps.ok()) << reps.status();
  EXPECT_EQ((*reps)[0].policy, proto::WorkSourceSpec::REPEAT);
  EXPECT_EQ((*reps)[0].AllowedPasses(), std::optional<uint64_t>(4));
  EXPECT_FALSE((*reps)[0].reshuffle);
  EXPECT_EQ((*reps)[1].passes, 5u);
  EXPECT_TRUE((*reps)[1].reshuffle);
  EXPECT_EQ(DescribeRepetition((*reps)[0]), "repeat, max_repeats 3, replayed");
  // A dataset's stop_after_passes makes it a stop_after_passes dataset under "repeat".
  spec = Spec(proto::WorkSourceSpec::REPEAT);
  spec.mutable_datasets(1)->set_stop_after_passes(3);
  reps = ResolveRepetition(spec);
  ASSERT_TRUE(reps.ok()) << reps.status();
  EXPECT_EQ((*reps)[0].AllowedPasses(), std::nullopt);
  EXPECT_EQ((*reps)[1].policy, proto::WorkSourceSpec::STOP_AFTER_PASSES);
  EXPECT_EQ((*reps)[1].AllowedPasses(), std::optional<uint64_t>(3));
}

TEST(RepetitionTest, RefusesWhatUpstreamRefusesNamingTheDataset) {
  auto spec = Spec(proto::WorkSourceSpec::STOP);
  spec.mutable_datasets(1)->set_exhausted_policy(proto::WorkSourceSpec::STOP);
  spec.mutable_datasets(1)->set_stop_after_passes(2);
  auto reps = ResolveRepetition(spec);
  ASSERT_FALSE(reps.ok());
  EXPECT_NE(reps.status().message().find("('code') sets stop_after_passes = 2 with "
                                         "exhausted_policy 'stop'"),
            std::string::npos)
      << reps.status();
  spec = Spec(proto::WorkSourceSpec::REPEAT);
  spec.mutable_datasets(0)->set_max_repeats(1);
  spec.mutable_datasets(0)->set_stop_after_passes(2);
  reps = ResolveRepetition(spec);
  ASSERT_FALSE(reps.ok());
  EXPECT_NE(reps.status().message().find("('web') sets both stop_after_passes = 2 and "
                                         "max_repeats = 1"),
            std::string::npos)
      << reps.status();
  // max_repeats without "repeat": the single-policy engine's message.
  spec = Spec(proto::WorkSourceSpec::REPEAT);
  spec.mutable_datasets(1)->set_exhausted_policy(proto::WorkSourceSpec::STOP);
  spec.mutable_datasets(1)->set_max_repeats(1);
  reps = ResolveRepetition(spec);
  ASSERT_FALSE(reps.ok());
  EXPECT_EQ(reps.status().message(),
            "work_source.datasets[1] ('code').max_repeats = 1 needs exhausted_policy "
            "'repeat', got 'stop'");
  spec = Spec(proto::WorkSourceSpec::REPEAT);
  spec.mutable_datasets(0)->set_exhausted_policy(
      static_cast<proto::WorkSourceSpec::ExhaustedPolicy>(9));
  EXPECT_FALSE(ResolveRepetition(spec).ok());
}

TEST(RepetitionTest, StreamEndIsMinOfCapAndMaxOfFloor) {
  // last_chunk(k, limit) = limit / (k + 1): dataset k draws k + 1 per chunk.
  auto last = [](size_t k, uint64_t limit) -> std::optional<uint64_t> {
    return limit / (k + 1);
  };
  Repetition floor2{proto::WorkSourceSpec::STOP_AFTER_PASSES, 2, std::nullopt, true};
  Repetition stop{proto::WorkSourceSpec::STOP, 1, std::nullopt, true};
  Repetition filler{proto::WorkSourceSpec::REPEAT, 1, std::nullopt, true};
  Repetition bounded{proto::WorkSourceSpec::REPEAT, 1, 1, true};
  const std::vector<uint64_t> n = {10, 30};
  EXPECT_EQ(StreamEnd({floor2, floor2}, n, last), std::optional<uint64_t>(30));  // max(20, 30)
  EXPECT_EQ(StreamEnd({stop, stop}, n, last), std::optional<uint64_t>(10));      // min(10, 15)
  EXPECT_EQ(StreamEnd({filler, filler}, n, last), std::nullopt);
  EXPECT_EQ(StreamEnd({filler, stop}, n, last), std::optional<uint64_t>(15));
  EXPECT_EQ(StreamEnd({bounded, floor2}, n, last), std::optional<uint64_t>(20));  // min(20, 30)
  // A dataset never drawn again does not hold a floor open (nor cap it).
  auto never = [](size_t k, uint64_t limit) -> std::optional<uint64_t> {
    if (k == 0) return std::nullopt;
    return limit / 2;
  };
  EXPECT_EQ(StreamEnd({floor2, floor2}, n, never), std::optional<uint64_t>(30));
  EXPECT_EQ(StreamEnd({stop, filler}, n, never), std::nullopt);
}

}  // namespace
}  // namespace zephon::pipeline
