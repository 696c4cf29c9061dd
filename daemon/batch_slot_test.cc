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

BatchSchema Schema(uint64_t rows, uint64_t cols, bool positions, bool pads = false) {
  pipeline::LaneOptions lanes;
  lanes.microbatch_size = rows;
  lanes.max_length = cols;
  lanes.emit_positions = positions;
  if (pads) lanes.pack.algorithm = pipeline::PackAlgorithm::kBestFit;
  return BatchSchema::Of(lanes);
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
  absl::StatusOr<BatchCells> cells =
      AddBatchTensors(schema, static_cast<uint32_t>(schema.rows), ids, &*slot);
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
        Schema(3, 17, false), Schema(4, 9, true, true), Schema(3, 17, false, true)}) {
    const uint64_t bytes = schema.SlotPayloadBytes();
    EXPECT_TRUE(WriteLargestBatch(schema, bytes).ok())
        << schema.rows << "x" << schema.cols << " positions=" << schema.emit_positions;
    // One byte less must not hold it: the formula is the layout, not an over-estimate.
    absl::Status smaller = WriteLargestBatch(schema, bytes - 1);
    EXPECT_EQ(smaller.code(), absl::StatusCode::kResourceExhausted)
        << schema.rows << "x" << schema.cols << ": " << smaller;
  }
}

TEST(BatchSchemaTest, HugeShapesSaturateInsteadOfWrapping) {
  EXPECT_EQ(Schema(uint64_t{1} << 40, uint64_t{1} << 40, true).SlotPayloadBytes(),
            std::numeric_limits<uint64_t>::max());
}

}  // namespace
}  // namespace zephon::daemon
