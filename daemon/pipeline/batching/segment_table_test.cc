#include "daemon/pipeline/batching/segment_table.h"

#include <vector>

#include "gtest/gtest.h"

namespace zephon::pipeline {
namespace {

Segment Piece(uint64_t index, uint64_t count) {
  Segment s;
  s.id = SampleId{0, 0, index};
  s.count = count;
  return s;
}

Segment Pad(uint64_t count) {
  Segment s;
  s.count = count;
  s.padding = true;
  return s;
}

BatchPlan PlanOf(uint32_t rows, uint32_t cols, std::vector<Segment> segments) {
  BatchPlan plan;
  plan.rows = rows;
  plan.cols = cols;
  plan.segments = std::move(segments);
  return plan;
}

TEST(SegmentTableTest, RowsListTheirPiecesThenZerosAndSkipPadding) {
  // Row 0: 3 + 4 + padding 1; row 1: 8; row 2: 2 + 2 + 2 + 2.
  const SegmentTable t = SegmentTableOf(PlanOf(
      3, 8, {Piece(0, 3), Piece(1, 4), Pad(1), Piece(2, 8), Piece(3, 2), Piece(4, 2),
             Piece(5, 2), Piece(6, 2)}));
  EXPECT_EQ(t.width, 4u);
  EXPECT_EQ(t.lengths, (std::vector<int32_t>{3, 4, 0, 0,  //
                                             8, 0, 0, 0,  //
                                             2, 2, 2, 2}));
}

TEST(SegmentTableTest, RowsSumToTheirValidCells) {
  const BatchPlan plan =
      PlanOf(2, 10, {Piece(0, 6), Piece(1, 1), Pad(3), Piece(1, 1), Piece(2, 9)});
  const SegmentTable t = SegmentTableOf(plan);
  ASSERT_EQ(t.width, 2u);
  EXPECT_EQ(t.lengths[0] + t.lengths[1], 7);  // 10 cells - 3 padding
  EXPECT_EQ(t.lengths[2] + t.lengths[3], 10);
}

TEST(SegmentTableTest, APaddingOnlyRowHasNoSegmentsButTheWidthStaysOne) {
  const SegmentTable t = SegmentTableOf(PlanOf(2, 4, {Pad(4), Pad(4)}));
  EXPECT_EQ(t.width, 1u);
  EXPECT_EQ(t.lengths, (std::vector<int32_t>{0, 0}));
}

TEST(SegmentTableTest, AnEmptyPlanHasAnEmptyTable) {
  const SegmentTable t = SegmentTableOf(PlanOf(0, 4, {}));
  EXPECT_EQ(t.width, 0u);
  EXPECT_TRUE(t.lengths.empty());
}

TEST(SegmentTableTest, MaxSegmentsIsTheCapOrOnePerCell) {
  EXPECT_EQ(MaxSegmentsPerRecord(4097, 0), 4097u);
  EXPECT_EQ(MaxSegmentsPerRecord(4097, 16), 16u);
  EXPECT_EQ(MaxSegmentsPerRecord(8, 100), 8u);
}

}  // namespace
}  // namespace zephon::pipeline
