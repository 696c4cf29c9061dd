#include "daemon/pipeline/batching/loss_mask_figures.h"

#include <gtest/gtest.h>

namespace zephon::pipeline {
namespace {

TEST(LossMaskFiguresTest, CountsMaskedRealCellsPerLaneExcludingPadding) {
  LossMaskTally tally;
  // Two rows of 4: [0 1 1 pad] [1 1 0 0-but-real]; 1 padding cell.
  const uint8_t first[] = {0, 1, 1, 0, 1, 1, 0, 0};
  tally.Add(3, first, 8, 1);
  const uint8_t second[] = {1, 1, 1, 1};
  tally.Add(3, second, 4, 0);
  const uint8_t other[] = {0, 0};
  tally.Add(1, other, 2, 2);  // padding only
  const std::vector<LossMaskFigures> lanes = tally.Snapshot();
  ASSERT_EQ(lanes.size(), 2u);
  EXPECT_EQ(lanes[0].lane, 1u);
  EXPECT_EQ(lanes[0].tokens, 0u);
  EXPECT_EQ(lanes[0].masked, 0u);
  EXPECT_EQ(lanes[0].Describe(), "tokens=0 masked=0 (-)");
  EXPECT_EQ(lanes[1].lane, 3u);
  EXPECT_EQ(lanes[1].tokens, 11u);
  EXPECT_EQ(lanes[1].masked, 3u);
  EXPECT_EQ(lanes[1].Describe(), "tokens=11 masked=3 (27.27%)");
}

TEST(LossMaskFiguresTest, PaddingCellsOfPlansAndBatches) {
  BatchPlan plan;
  plan.segments = {Segment{{0, 0, 1}, 0, 3, false}, Segment{{}, 0, 2, true},
                   Segment{{0, 0, 2}, 0, 5, false}};
  EXPECT_EQ(PaddingCells(plan), 2u);
  Batch batch;
  batch.cols = 5;
  EXPECT_EQ(PaddingCells(batch), 0u);  // wrap: no valid_tokens, no padding
  batch.valid_tokens = {3, 5, 0};
  EXPECT_EQ(PaddingCells(batch), 7u);
}

}  // namespace
}  // namespace zephon::pipeline
