#include "daemon/pipeline/ordering/phase_schedule.h"

#include <gtest/gtest.h>

#include <cmath>

#include "daemon/pipeline/ordering/mixture.h"

namespace zephon::pipeline {
namespace {

proto::WorkSourceSpec Spec(int datasets, uint64_t chunk_size,
                           proto::WorkSourceSpec::Interpolate interpolate) {
  proto::WorkSourceSpec spec;
  for (int k = 0; k < datasets; ++k) spec.add_datasets()->set_name(absl::StrCat("d", k));
  spec.set_chunk_size(chunk_size);
  spec.set_interpolate(interpolate);
  return spec;
}

void AddEntry(proto::WorkSourceSpec* spec, uint64_t start_chunk, std::vector<double> w) {
  auto* e = spec->add_schedule();
  e->set_start_chunk(start_chunk);
  for (double x : w) e->add_weights(x);
}

// The exact share of dataset k in chunks [0, n), in double (the test's independent
// reference: a plain per-chunk sum).
double ExactShare(const PhaseSchedule& s, size_t k, uint64_t n) {
  double total = 0;
  for (uint64_t g = 0; g < n; ++g) total += s.WeightsAt(g)[k] * s.chunk_size();
  return total;
}

PhaseSchedule Make(const proto::WorkSourceSpec& spec) {
  auto s = PhaseSchedule::Create(spec);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

TEST(PhaseScheduleTest, CumulativeIsTheFlooredExactShareMonotoneAndNearlyFull) {
  for (auto interp : {proto::WorkSourceSpec::STEP, proto::WorkSourceSpec::LINEAR}) {
    auto spec = Spec(3, 97, interp);
    AddEntry(&spec, 0, {0.7, 0.3, 0});
    AddEntry(&spec, 13, {0.1, 0.2, 0.7});
    AddEntry(&spec, 40, {0, 1, 1});
    const PhaseSchedule s = Make(spec);
    std::vector<uint64_t> prev(3, 0), a;
    for (uint64_t n = 0; n <= 80; ++n) {
      s.Cumulative(n, &a);
      uint64_t sum = 0;
      for (size_t k = 0; k < 3; ++k) {
        // Floor of the exact share (double reference; the shares here are far from
        // integers' rounding trouble except at exact integers, allowed by the 1e-6).
        const double exact = ExactShare(s, k, n);
        EXPECT_LE(static_cast<double>(a[k]), exact + 1e-6) << "n=" << n << " k=" << k;
        EXPECT_GT(static_cast<double>(a[k]), exact - 1 - 1e-6) << "n=" << n << " k=" << k;
        EXPECT_GE(a[k], prev[k]) << "monotone, n=" << n;
        sum += a[k];
      }
      EXPECT_LE(sum, 97 * n);
      EXPECT_GT(sum + 3, 97 * n) << "n=" << n;  // Short by < K.
      prev = a;
    }
    // Dataset 2 draws nothing in the first step phase; dataset 0 nothing after 40.
    std::vector<uint64_t> q;
    for (uint64_t g = 0; g < 13; ++g) {
      s.ChunkQuotas(g, &q);
      if (interp == proto::WorkSourceSpec::STEP) {
        EXPECT_EQ(q[2], 0u) << g;
      }
    }
    s.ChunkQuotas(0, &q);
    EXPECT_EQ(q[2], 0u);  // Linear too: chunk 0 has entry 0's weights (t = 0).
    for (uint64_t g = 40; g < 60; ++g) {
      s.ChunkQuotas(g, &q);
      EXPECT_EQ(q[0], 0u) << g;
    }
  }
}

TEST(PhaseScheduleTest, BoundariesInSamplesRoundUpToTheNextChunk) {
  auto spec = Spec(2, 100, proto::WorkSourceSpec::STEP);
  AddEntry(&spec, 0, {1, 0});
  auto* e = spec.add_schedule();
  e->set_start_sample(250);  // ceil(250 / 100) = 3.
  e->add_weights(0);
  e->add_weights(1);
  e = spec.add_schedule();
  e->set_start_sample(400);  // Exactly chunk 4.
  e->add_weights(1);
  e->add_weights(1);
  const PhaseSchedule s = Make(spec);
  EXPECT_EQ(s.phases()[1].start_chunk, 3u);
  EXPECT_EQ(s.phases()[2].start_chunk, 4u);
  EXPECT_EQ(s.PhaseOf(2), 0u);
  EXPECT_EQ(s.PhaseOf(3), 1u);
  EXPECT_EQ(s.WeightsAt(5), (std::vector<double>{0.5, 0.5}));
  std::vector<uint64_t> a;
  s.Cumulative(4, &a);
  EXPECT_EQ(a, (std::vector<uint64_t>{300, 100}));
  // Sample 201 is chunk 3 too: it collides with entry 1.
  e->set_start_sample(201);
  EXPECT_FALSE(PhaseSchedule::Create(spec).ok());
}

TEST(PhaseScheduleTest, LinearRampsBetweenEntriesChunkByChunk) {
  auto spec = Spec(2, 1000, proto::WorkSourceSpec::LINEAR);
  AddEntry(&spec, 0, {1, 0});
  AddEntry(&spec, 10, {0, 1});
  const PhaseSchedule s = Make(spec);
  std::vector<uint64_t> q;
  for (uint64_t g = 0; g < 10; ++g) {
    s.ChunkQuotas(g, &q);
    // W_1(g) = g / 10 exactly: the quotas are exact too.
    EXPECT_EQ(q[1], 100 * g) << g;
    EXPECT_EQ(q[0] + q[1], 1000u);
  }
  s.ChunkQuotas(10, &q);
  EXPECT_EQ(q, (std::vector<uint64_t>{0, 1000}));
  EXPECT_EQ(s.LastChunk(0, 5500), std::nullopt);  // Dataset 0's total is 5500 draws.
  EXPECT_EQ(s.LastChunk(0, 4500), std::optional<uint64_t>(6));  // 1000 + 900 + ... + 500.
  EXPECT_EQ(s.LastChunk(0, 5499), std::optional<uint64_t>(9));
  EXPECT_EQ(s.LastChunk(1, 4500), std::optional<uint64_t>(10));  // A_1(10) = 4500.
}

TEST(PhaseScheduleTest, PerPhaseProportionsWithinOneSamplePerDatasetOfTheTarget) {
  auto spec = Spec(3, 1024, proto::WorkSourceSpec::STEP);
  AddEntry(&spec, 0, {6, 3, 1});
  AddEntry(&spec, 100, {1, 1, 8});
  const PhaseSchedule s = Make(spec);
  std::vector<uint64_t> at0, at100, at300;
  s.Cumulative(0, &at0);
  s.Cumulative(100, &at100);
  s.Cumulative(300, &at300);
  const double targets[2][3] = {{0.6, 0.3, 0.1}, {0.1, 0.1, 0.8}};
  for (size_t k = 0; k < 3; ++k) {
    // Stated tolerance: each phase's count is within 1 sample of its exact share.
    EXPECT_NEAR(static_cast<double>(at100[k] - at0[k]), targets[0][k] * 1024 * 100, 1.0);
    EXPECT_NEAR(static_cast<double>(at300[k] - at100[k]), targets[1][k] * 1024 * 200, 2.0);
  }
}

TEST(PhaseScheduleTest, ClosedFormScalesToHugeChunkIndices) {
  auto spec = Spec(2, 16384, proto::WorkSourceSpec::LINEAR);
  AddEntry(&spec, 0, {3, 1});
  AddEntry(&spec, uint64_t{1} << 29, {1, 3});
  AddEntry(&spec, (uint64_t{1} << 29) + (uint64_t{1} << 30), {1, 1});  // The longest ramp.
  const PhaseSchedule s = Make(spec);
  std::vector<uint64_t> a, b;
  const uint64_t n = (uint64_t{1} << 49) + 12345;
  s.Cumulative(n, &a);
  s.Cumulative(n + 1, &b);
  EXPECT_LE(a[0] + a[1], 16384 * n);
  EXPECT_GT(a[0] + a[1] + 2, 16384 * n);
  EXPECT_EQ(b[0] - a[0], 8192u);
  // Mid-ramp: a[k] equals the double reference within its precision.
  s.Cumulative(uint64_t{1} << 28, &a);
  const double m = std::ldexp(1.0, 28), len = std::ldexp(1.0, 29);
  // sum_{t<m} (3 (L - t) + t) / (4 L) * cs.
  const double exact = 16384.0 * (3 * (len * m - m * (m - 1) / 2) + m * (m - 1) / 2) / (4 * len);
  EXPECT_NEAR(static_cast<double>(a[0]), exact, exact * 1e-12);
}

TEST(PhaseScheduleTest, AChunkSizeBelowTheDatasetCountIsRefused) {
  // chunk_size 1 over two datasets at 0.5 / 0.5: chunk 0 would draw floor(0.5) = 0 of
  // each, an empty chunk that would end its lane.
  auto spec = Spec(2, 1, proto::WorkSourceSpec::STEP);
  AddEntry(&spec, 0, {1, 1});
  auto s = PhaseSchedule::Create(spec);
  ASSERT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("chunk_size 1 is smaller than the 2 datasets"),
            std::string::npos)
      << s.status();
  spec.set_chunk_size(2);
  EXPECT_TRUE(PhaseSchedule::Create(spec).ok());
}

TEST(PhaseScheduleTest, RefusalsNameTheEntry) {
  auto spec = Spec(2, 10, proto::WorkSourceSpec::STEP);
  AddEntry(&spec, 0, {1, 1});
  AddEntry(&spec, 5, {1, 1});
  AddEntry(&spec, 5, {1, 2});
  auto s = PhaseSchedule::Create(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("work_source.schedule[2] starts at chunk 5, not after "
                                      "work_source.schedule[1]'s chunk 5"),
            std::string::npos)
      << s.status();
  spec.mutable_schedule(2)->set_start_chunk(6);
  spec.mutable_schedule(1)->set_weights(0, 0);
  spec.mutable_schedule(1)->set_weights(1, 0);
  s = PhaseSchedule::Create(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("work_source.schedule[1] gives every dataset weight 0"),
            std::string::npos);
  spec.mutable_schedule(1)->set_weights(1, -1);
  s = PhaseSchedule::Create(spec);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("schedule[1] weight of dataset 'd1' = -1"),
            std::string::npos);
  spec.mutable_schedule(1)->set_weights(1, 1);
  spec.mutable_schedule(0)->set_start_chunk(1);
  EXPECT_NE(PhaseSchedule::Create(spec).status().message().find("first entry must start at 0"),
            std::string::npos);
  spec.mutable_schedule(0)->set_start_chunk(0);
  spec.add_weights(1);
  EXPECT_NE(PhaseSchedule::Create(spec).status().message().find("both set"), std::string::npos);
  spec.clear_weights();
  spec.mutable_schedule(2)->add_weights(3);
  EXPECT_NE(PhaseSchedule::Create(spec).status().message().find(
                "work_source.schedule[2] has 3 weights, datasets has 2"),
            std::string::npos);
  spec.mutable_schedule(2)->mutable_weights()->RemoveLast();
  spec.set_interpolate(proto::WorkSourceSpec::LINEAR);
  spec.mutable_schedule(2)->set_start_chunk(uint64_t{1} << 31);
  EXPECT_NE(PhaseSchedule::Create(spec).status().message().find("linear ramp"),
            std::string::npos);
  EXPECT_TRUE(PhaseSchedule::Create(Spec(2, 10, proto::WorkSourceSpec::STEP)).status().message()
                  .find("empty") != std::string::npos);
}

}  // namespace
}  // namespace zephon::pipeline
