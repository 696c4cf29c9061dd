#include "daemon/instance_figures.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace zephon::daemon {
namespace {

pipeline::PackFigures Lane(uint32_t lane, uint64_t tokens, uint64_t padding) {
  pipeline::PackFigures f;
  f.lane = lane;
  f.records = (tokens + padding) / 10;
  f.tokens = tokens;
  f.padding_cells = padding;
  return f;
}

TEST(InstanceFiguresTest, PackingLinesPerLaneThenASummaryWithTheLeastFilledLane) {
  std::string few;
  AppendPackingLines({Lane(0, 90, 10), Lane(3, 100, 0)}, &few);
  EXPECT_EQ(few,
            "    packing lane 0 (planned so far): records=10 tokens=90 padding_cells=10 "
            "fill=90.00%\n"
            "    packing lane 3 (planned so far): records=10 tokens=100 padding_cells=0 "
            "fill=100.00%\n");
  std::vector<pipeline::PackFigures> many;
  for (uint32_t l = 0; l <= kFigureLinesPerLane; ++l) many.push_back(Lane(l, 95, 5));
  many[4] = Lane(4, 50, 50);
  std::string summary;
  AppendPackingLines(many, &summary);
  const std::vector<std::string> lines = absl::StrSplit(summary, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << summary;
  EXPECT_TRUE(absl::StrContains(lines[0], "packing 9 lanes (planned so far)")) << lines[0];
  EXPECT_TRUE(absl::StrContains(lines[1], "least filled lane 4")) << lines[1];
  EXPECT_TRUE(absl::StrContains(lines[1], "fill=50.00%")) << lines[1];
}

TEST(InstanceFiguresTest, CurriculumStatusNamesEachDatasetsWeight) {
  pipeline::CurriculumPosition at;
  at.chunk = 12;
  at.phase = 1;
  at.phases = 3;
  at.phase_start_chunk = 10;
  at.linear = true;
  at.weights = {0.25, 0.75};
  proto::CurriculumStatus out;
  AddCurriculumStatus(at, {"web", "code"}, &out);
  EXPECT_EQ(out.phase(), 1u);
  EXPECT_EQ(out.phases(), 3u);
  EXPECT_EQ(out.phase_start_chunk(), 10u);
  EXPECT_EQ(out.interpolate(), "linear");
  EXPECT_EQ(out.chunk(), 12u);
  ASSERT_EQ(out.weights_size(), 2);
  EXPECT_EQ(out.weights(1).dataset(), "code");
  EXPECT_DOUBLE_EQ(out.weights(1).weight(), 0.75);
}

TEST(InstanceFiguresTest, MixtureStatusGivesTargetAndAchievedShares) {
  pipeline::MixtureFigures f;
  f.lane = 2;
  f.datasets.resize(2);
  f.datasets[0].target_share = 0.5;
  f.datasets[0].samples = 30;
  f.datasets[1].target_share = 0.5;
  f.datasets[1].samples = 10;
  proto::InstanceStatus s;
  AddMixtureStatus({f}, {"a", "b"}, &s);
  ASSERT_EQ(s.mixture_size(), 1);
  EXPECT_EQ(s.mixture(0).lane(), 2u);
  EXPECT_EQ(s.mixture(0).weight_by(), "samples");
  EXPECT_EQ(s.mixture(0).datasets(0).dataset(), "a");
  EXPECT_DOUBLE_EQ(s.mixture(0).datasets(0).achieved_share(), 0.75);
}

}  // namespace
}  // namespace zephon::daemon
