#include "daemon/pipeline/ordering/ensure_mixture.h"

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "gtest/gtest.h"

namespace zephon::pipeline {
namespace {

std::vector<SampleId> Mix(const std::vector<SampleId>& in, const std::vector<double>& target,
                          const EnsureMixtureOptions& o, MixtureGroupCounts* counts,
                          uint64_t a_length = 1) {
  std::vector<SampleId> out = in;
  EnsureMixture(
      o, target, [&](const SampleId& id) { return id.dataset == 0 ? a_length : 1; }, &out,
      counts);
  return out;
}

// n samples of dataset `dataset`, indexes from `first`.
void Append(uint32_t dataset, uint64_t first, uint64_t n, std::vector<SampleId>* v) {
  for (uint64_t i = 0; i < n; ++i) v->push_back(SampleId{dataset, 0, first + i});
}

EnsureMixtureOptions Options(uint64_t max_buffer_size) {
  EnsureMixtureOptions o;
  o.enabled = true;
  o.max_buffer_size = max_buffer_size;
  return o;
}

TEST(EnsureMixtureTest, InterleavesBlocksTowardTheTarget) {
  std::vector<SampleId> in;
  Append(0, 0, 50, &in);
  Append(1, 0, 50, &in);
  MixtureGroupCounts counts;
  const std::vector<SampleId> out = Mix(in, {1, 1}, Options(1000), &counts);
  ASSERT_EQ(out.size(), 100u);
  // Every prefix is within one sample of 1:1.
  int64_t balance = 0;
  for (const SampleId& id : out) {
    balance += id.dataset == 0 ? 1 : -1;
    EXPECT_LE(std::llabs(balance), 1);
  }
  // Within a dataset the arrival order is kept.
  uint64_t next[2] = {0, 0};
  for (const SampleId& id : out) EXPECT_EQ(id.index, next[id.dataset]++);
  EXPECT_EQ(counts.samples, (std::vector<uint64_t>{50, 50}));
  EXPECT_EQ(counts.dropped_samples, (std::vector<uint64_t>{0, 0}));
  EXPECT_LT(counts.max_deviation, 1e-9);
}

TEST(EnsureMixtureTest, BoundedBufferDrainsAndEmitsEverythingAtTheGroupEnd) {
  std::vector<SampleId> in;
  Append(0, 0, 40, &in);
  Append(1, 0, 10, &in);
  MixtureGroupCounts counts;
  const std::vector<SampleId> out = Mix(in, {1, 1}, Options(8), &counts);
  EXPECT_EQ(out.size(), 50u);
  // The buffer held at most 8: dataset 1's first sample cannot leave later than
  // position 40 - 8 + ... i.e. the first 40 arrivals produced >= 32 outputs, all of
  // dataset 0, so at least 31 dataset-0 samples precede the first dataset-1 one.
  const auto first_b = std::find_if(out.begin(), out.end(),
                                    [](const SampleId& id) { return id.dataset == 1; });
  EXPECT_GE(first_b - out.begin(), 31);
  EXPECT_EQ(counts.samples, (std::vector<uint64_t>{40, 10}));
  EXPECT_GT(counts.max_deviation, 0.2);  // 40:10 against 1:1.
}

TEST(EnsureMixtureTest, ExactModeDropsTheSurplusAtTheGroupEnd) {
  std::vector<SampleId> in;
  Append(0, 0, 10, &in);
  Append(1, 0, 2, &in);
  MixtureGroupCounts counts;
  const std::vector<SampleId> out = Mix(in, {1, 1}, Options(0), &counts);
  EXPECT_EQ(counts.samples[1], 2u);
  EXPECT_LE(counts.samples[0], 3u);  // SWRR: within one sample of the target.
  EXPECT_EQ(counts.samples[0] + counts.dropped_samples[0], 10u);
  EXPECT_EQ(counts.dropped_samples[1], 0u);
  EXPECT_EQ(out.size(), counts.samples[0] + counts.samples[1]);
}

TEST(EnsureMixtureTest, WeightByTokensCountsLengths) {
  std::vector<SampleId> in;
  for (uint64_t i = 0; i < 200; ++i) in.push_back(SampleId{static_cast<uint32_t>(i % 2), 0, i});
  EnsureMixtureOptions o = Options(0);
  o.weight_by_tokens = true;
  MixtureGroupCounts counts;
  Mix(in, {1, 1}, o, &counts, /*a_length=*/4);
  // Dataset 0's samples are 4 tokens, dataset 1's 1 token: 1:1 in tokens is 1:4 in
  // samples, so dataset 0 is cut to about a quarter of dataset 1's 100.
  EXPECT_EQ(counts.samples[1], 100u);
  EXPECT_NEAR(static_cast<double>(counts.tokens[0]), 100.0, 4.0);
  EXPECT_GT(counts.dropped_samples[0], 70u);
}

TEST(EnsureMixtureTest, ObsoleteDatasetsLeaveAtTheDrainRate) {
  std::vector<SampleId> in;
  for (uint64_t i = 0; i < 400; ++i) in.push_back(SampleId{static_cast<uint32_t>(i % 2), 0, i});
  EnsureMixtureOptions o = Options(1000);
  o.obsolete_drain_rate = 0.25;
  MixtureGroupCounts counts;
  const std::vector<SampleId> out = Mix(in, {1, 0}, o, &counts);
  ASSERT_EQ(out.size(), 400u);  // Nothing is lost outside exact mode.
  // While both are buffered (the first 200 outputs at least), 1 in 4 is obsolete.
  uint64_t obsolete = 0;
  for (size_t i = 0; i < 200; ++i) obsolete += out[i].dataset;
  EXPECT_NEAR(static_cast<double>(obsolete), 50.0, 2.0);
}

TEST(EnsureMixtureTest, IsDeterministic) {
  std::vector<SampleId> in;
  for (uint64_t i = 0; i < 300; ++i) {
    in.push_back(SampleId{static_cast<uint32_t>((i * 7919) % 3), 0, i});
  }
  MixtureGroupCounts a, b;
  EXPECT_EQ(Mix(in, {3, 2, 1}, Options(16), &a), Mix(in, {3, 2, 1}, Options(16), &b));
}

TEST(EnsureMixtureTest, OptionsAreValidatedNamingTheField) {
  proto::EnsureMixtureSpec spec;
  spec.set_drain_target_ratio(1.0);
  auto bad = EnsureMixtureOptionsFromSpec(spec, 2);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("operators[2] ensure_mixture.drain_target_ratio"),
            std::string::npos);
  spec.Clear();
  spec.set_weight_by("bytes");
  EXPECT_FALSE(EnsureMixtureOptionsFromSpec(spec, 0).ok());
  spec.Clear();
  spec.set_obsolete_drain_rate(0);
  EXPECT_FALSE(EnsureMixtureOptionsFromSpec(spec, 0).ok());
  spec.Clear();
  spec.set_max_buffer_size(kMaxMixtureBufferSize + 1);
  EXPECT_FALSE(EnsureMixtureOptionsFromSpec(spec, 0).ok());
  spec.Clear();
  ResolveEnsureMixtureDefaults(&spec);
  auto ok = EnsureMixtureOptionsFromSpec(spec, 0);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->max_buffer_size, kDefaultMixtureBufferSize);
  EXPECT_EQ(spec.weight_by(), "samples");
}

}  // namespace
}  // namespace zephon::pipeline
