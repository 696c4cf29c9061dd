#include "daemon/pipeline/batching/segment_table.h"

#include <algorithm>

namespace zephon::pipeline {

SegmentTable SegmentTableOf(const BatchPlan& plan) {
  SegmentTable table;
  if (plan.rows == 0 || plan.cols == 0) return table;
  // Pass 1: each row's segment count, to size the table.
  std::vector<uint32_t> counts(plan.rows, 0);
  uint64_t cell = 0;
  for (const Segment& seg : plan.segments) {
    const uint64_t row = cell / plan.cols;
    if (!seg.padding && seg.count > 0 && row < plan.rows) ++counts[row];
    cell += seg.count;
  }
  table.width = std::max<uint32_t>(1, *std::max_element(counts.begin(), counts.end()));
  table.lengths.assign(uint64_t{plan.rows} * table.width, 0);
  // Pass 2: the lengths, each row's from its first column.
  std::fill(counts.begin(), counts.end(), 0);
  cell = 0;
  for (const Segment& seg : plan.segments) {
    const uint64_t row = cell / plan.cols;
    if (!seg.padding && seg.count > 0 && row < plan.rows) {
      table.lengths[row * table.width + counts[row]++] = static_cast<int32_t>(seg.count);
    }
    cell += seg.count;
  }
  return table;
}

uint64_t MaxSegmentsPerRecord(uint64_t max_length, uint32_t max_sequences_per_bin) {
  if (max_sequences_per_bin == 0) return max_length;
  return std::min<uint64_t>(max_length, max_sequences_per_bin);
}

}  // namespace zephon::pipeline
