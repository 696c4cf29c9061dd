#include "daemon/batch_slot.h"

#include <unistd.h>

#include <atomic>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace zephon::daemon {
namespace {

std::string RingName() {
  static std::atomic<int> counter{0};
  return absl::StrCat("zephon-test.", getpid(), ".batch_slot.", counter.fetch_add(1));
}

BatchSchema Schema(uint64_t rows, uint64_t cols, bool positions, bool pads = false,
                   bool segments = false, uint32_t max_sequences_per_bin = 0) {
  pipeline::LaneOptions lanes;
  lanes.microbatch_size = rows;
  lanes.max_length = cols;
  lanes.emit_positions = positions;
  if (pads) lanes.pack.algorithm = pipeline::PackAlgorithm::kBestFit;
  lanes.pack.max_sequences_per_bin = max_sequences_per_bin;
  lanes.segments = segments;
  return BatchSchema::Of(lanes);
}

// The widest segment table `schema` allows: every row holds max_segments 1-cell pieces.
pipeline::SegmentTable WidestTable(const BatchSchema& schema) {
  pipeline::SegmentTable table;
  table.width = static_cast<uint32_t>(schema.max_segments);
  table.lengths.assign(schema.rows * schema.max_segments, 1);
  return table;
}

// A worst-case batch of `schema` (every row full, one sample per cell) written into a
// slot of `payload_bytes`.
absl::Status WriteLargestBatch(const BatchSchema& schema, uint64_t payload_bytes) {
  auto writer = shm::RingWriter::Create(RingName(), shm::RingGeometry{2, payload_bytes, 1},
                                        "test");
  if (!writer.ok()) return writer.status();
  absl::StatusOr<shm::SlotWriter> slot = (*writer)->Loan(absl::Seconds(1));
  if (!slot.ok()) return slot.status();
  std::vector<pipeline::SampleId> ids(schema.rows * schema.cols);
  for (size_t i = 0; i < ids.size(); ++i) ids[i].index = i;
  const pipeline::SegmentTable segments = WidestTable(schema);
  absl::StatusOr<BatchCells> cells =
      AddBatchTensors(schema, static_cast<uint32_t>(schema.rows), ids, &segments, &*slot);
  if (!cells.ok()) return cells.status();
  if ((cells->positions != nullptr) != schema.emit_positions) {
    return absl::InternalError("positions pointer disagrees with the schema");
  }
  if ((cells->valid_tokens != nullptr) != schema.valid_tokens) {
    return absl::InternalError("valid_tokens pointer disagrees with the schema");
  }
  cells->tokens[schema.rows * schema.cols - 1] = 7;  // the last cell is inside the slot
  return absl::OkStatus();
}

TEST(BatchSchemaTest, ListsTheTensorsTheProducerWrites) {
  const std::vector<TensorSchema> with = Schema(4, 9, true).Tensors();
  ASSERT_EQ(with.size(), 3u);
  EXPECT_EQ(with[0].name, "tokens");
  EXPECT_EQ(with[0].max_shape, (std::vector<uint64_t>{4, 9}));
  EXPECT_EQ(with[1].name, "positions");
  EXPECT_EQ(with[1].dtype, shm::DType::kInt32);
  EXPECT_EQ(with[2].name, "sample_ids");
  EXPECT_EQ(with[2].dtype, shm::DType::kInt64);
  EXPECT_EQ(with[2].max_shape, (std::vector<uint64_t>{36, 3}));
  const std::vector<TensorSchema> without = Schema(4, 9, false).Tensors();
  ASSERT_EQ(without.size(), 2u);
  EXPECT_EQ(without[1].name, "sample_ids");
}

TEST(BatchSchemaTest, PaddingAlgorithmsAddValidTokensPerRow) {
  const std::vector<TensorSchema> padded = Schema(4, 9, true, /*pads=*/true).Tensors();
  ASSERT_EQ(padded.size(), 4u);
  EXPECT_EQ(padded[2].name, "valid_tokens");
  EXPECT_EQ(padded[2].dtype, shm::DType::kInt32);
  EXPECT_EQ(padded[2].max_shape, (std::vector<uint64_t>{4}));
  EXPECT_EQ(padded[3].name, "sample_ids");
  // 4 int32 = 16 bytes, padded to the next 64-byte boundary like the others.
  EXPECT_EQ(Schema(4, 9, true, true).SlotPayloadBytes(), 192u + 192u + 64u + 864u);
}

TEST(BatchSchemaTest, SlotSizeIsTheSumOfAlignedTensors) {
  // 4 x 9 int32 = 144, padded to 192 before the next tensor; sample ids 36 x 3 int64 =
  // 864, the last tensor, unpadded.
  EXPECT_EQ(Schema(4, 9, true).SlotPayloadBytes(), 192u + 192u + 864u);
  EXPECT_EQ(Schema(4, 9, false).SlotPayloadBytes(), 192u + 864u);
  // 2 x 16 int32 = 128 (aligned already); 32 x 3 int64 = 768.
  EXPECT_EQ(Schema(2, 16, true).SlotPayloadBytes(), 128u + 128u + 768u);
}

TEST(BatchSchemaTest, LargestBatchFitsExactlyTheComputedSlot) {
  for (const BatchSchema& schema :
       {Schema(1, 2, true), Schema(4, 9, true), Schema(4, 9, false), Schema(8, 2049, true),
        Schema(3, 17, false), Schema(4, 9, true, true), Schema(3, 17, false, true),
        Schema(4, 9, false, false, /*segments=*/true),
        Schema(4, 33, false, true, /*segments=*/true, /*max_sequences_per_bin=*/5)}) {
    const uint64_t bytes = schema.SlotPayloadBytes();
    EXPECT_TRUE(WriteLargestBatch(schema, bytes).ok())
        << schema.rows << "x" << schema.cols << " positions=" << schema.emit_positions;
    // One byte less must not hold it: the formula is the layout, not an over-estimate.
    absl::Status smaller = WriteLargestBatch(schema, bytes - 1);
    EXPECT_EQ(smaller.code(), absl::StatusCode::kResourceExhausted)
        << schema.rows << "x" << schema.cols << ": " << smaller;
  }
}

TEST(BatchSchemaTest, PackSequencesAddsSegmentLengthsBoundedByTheCap) {
  // No cap: one segment per cell at most.
  const std::vector<TensorSchema> open = Schema(4, 9, false, true, true).Tensors();
  ASSERT_EQ(open.size(), 4u);
  EXPECT_EQ(open[2].name, "segment_lengths");
  EXPECT_EQ(open[2].dtype, shm::DType::kInt32);
  EXPECT_EQ(open[2].max_shape, (std::vector<uint64_t>{4, 9}));
  EXPECT_EQ(open[3].name, "sample_ids");
  // max_sequences_per_bin bounds the width, and so the slot.
  const std::vector<TensorSchema> capped = Schema(4, 9, false, true, true, 3).Tensors();
  EXPECT_EQ(capped[2].max_shape, (std::vector<uint64_t>{4, 3}));
  EXPECT_LT(Schema(4, 9, false, true, true, 3).SlotPayloadBytes(),
            Schema(4, 9, false, true, true).SlotPayloadBytes());
  // pack_flat publishes none.
  for (const TensorSchema& t : Schema(4, 9, false, true).Tensors()) {
    EXPECT_NE(t.name, "segment_lengths");
  }
}

TEST(BatchSchemaTest, SegmentLengthsAreWrittenAtTheBatchWidthAndCheckedAgainstTheSchema) {
  const BatchSchema schema = Schema(2, 8, false, true, true, 4);
  auto writer = shm::RingWriter::Create(
      RingName(), shm::RingGeometry{2, schema.SlotPayloadBytes(), 1}, "test");
  ASSERT_TRUE(writer.ok()) << writer.status();
  absl::StatusOr<shm::SlotWriter> slot = (*writer)->Loan(absl::Seconds(1));
  ASSERT_TRUE(slot.ok()) << slot.status();
  const std::vector<pipeline::SampleId> ids(3);
  pipeline::SegmentTable too_wide;
  too_wide.width = 5;
  too_wide.lengths.assign(10, 1);
  EXPECT_EQ(AddBatchTensors(schema, 2, ids, &too_wide, &*slot).status().code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(AddBatchTensors(schema, 2, ids, nullptr, &*slot).status().code(),
            absl::StatusCode::kInternal);
  pipeline::SegmentTable table;
  table.width = 2;
  table.lengths = {5, 3, 8, 0};
  EXPECT_TRUE(AddBatchTensors(schema, 2, ids, &table, &*slot).ok());
}

TEST(BatchSchemaTest, HugeShapesSaturateInsteadOfWrapping) {
  EXPECT_EQ(Schema(uint64_t{1} << 40, uint64_t{1} << 40, true).SlotPayloadBytes(),
            std::numeric_limits<uint64_t>::max());
}

}  // namespace
}  // namespace zephon::daemon
