#include "daemon/batch_slot.h"

#include <limits>

#include "common/status_macros.h"

namespace zephon::daemon {
namespace {

constexpr uint64_t kSaturated = std::numeric_limits<uint64_t>::max();

uint64_t SaturatingMul(uint64_t a, uint64_t b) {
  uint64_t out;
  return __builtin_mul_overflow(a, b, &out) ? kSaturated : out;
}

uint64_t SaturatingAdd(uint64_t a, uint64_t b) {
  uint64_t out;
  return __builtin_add_overflow(a, b, &out) ? kSaturated : out;
}

constexpr char kTokens[] = "tokens";
constexpr char kPositions[] = "positions";
constexpr char kValidTokens[] = "valid_tokens";
constexpr char kSampleIds[] = "sample_ids";
constexpr char kLossMask[] = "loss_mask";

}  // namespace

BatchSchema BatchSchema::Of(const pipeline::LaneOptions& lanes) {
  BatchSchema schema;
  schema.rows = lanes.microbatch_size;
  schema.cols = lanes.max_length;
  schema.emit_positions = lanes.emit_positions;
  schema.valid_tokens = lanes.pack.pads();
  schema.loss_mask = lanes.loss_mask;
  return schema;
}

std::vector<TensorSchema> BatchSchema::Tensors() const {
  std::vector<TensorSchema> tensors;
  tensors.push_back({kTokens, shm::DType::kInt32, {rows, cols}});
  if (emit_positions) tensors.push_back({kPositions, shm::DType::kInt32, {rows, cols}});
  if (valid_tokens) tensors.push_back({kValidTokens, shm::DType::kInt32, {rows}});
  if (loss_mask) tensors.push_back({kLossMask, shm::DType::kUInt8, {rows, cols}});
  tensors.push_back({kSampleIds, shm::DType::kInt64, {SaturatingMul(rows, cols), 3}});
  return tensors;
}

uint64_t BatchSchema::SlotPayloadBytes() const {
  // As SlotWriter::AddTensor places them: each tensor at the next kTensorAlignment
  // boundary (the table before the payload is a multiple of it), the last one unpadded.
  uint64_t end = 0;
  for (const TensorSchema& t : Tensors()) {
    uint64_t bytes = shm::DTypeSize(t.dtype);
    for (uint64_t dim : t.max_shape) bytes = SaturatingMul(bytes, dim);
    const uint64_t aligned = SaturatingAdd(end, shm::kTensorAlignment - 1);
    const uint64_t offset =
        aligned == kSaturated ? kSaturated : aligned / shm::kTensorAlignment * shm::kTensorAlignment;
    end = SaturatingAdd(offset, bytes);
  }
  return end;
}

absl::StatusOr<BatchCells> AddBatchTensors(const BatchSchema& schema, uint32_t rows,
                                           const std::vector<pipeline::SampleId>& sample_ids,
                                           shm::SlotWriter* slot) {
  const std::vector<uint64_t> shape = {rows, schema.cols};
  BatchCells cells;
  ASSIGN_OR_RETURN(void* tokens, slot->AddTensor(kTokens, shm::DType::kInt32, shape));
  cells.tokens = static_cast<int32_t*>(tokens);
  if (schema.emit_positions) {
    ASSIGN_OR_RETURN(void* positions, slot->AddTensor(kPositions, shm::DType::kInt32, shape));
    cells.positions = static_cast<int32_t*>(positions);
  }
  if (schema.valid_tokens) {
    ASSIGN_OR_RETURN(void* valid, slot->AddTensor(kValidTokens, shm::DType::kInt32, {rows}));
    cells.valid_tokens = static_cast<int32_t*>(valid);
  }
  if (schema.loss_mask) {
    ASSIGN_OR_RETURN(void* mask, slot->AddTensor(kLossMask, shm::DType::kUInt8, shape));
    cells.loss_mask = static_cast<uint8_t*>(mask);
  }
  ASSIGN_OR_RETURN(void* ids_raw,
                   slot->AddTensor(kSampleIds, shm::DType::kInt64,
                                   {static_cast<uint64_t>(sample_ids.size()), 3}));
  auto* ids = static_cast<int64_t*>(ids_raw);
  for (size_t i = 0; i < sample_ids.size(); ++i) {
    ids[3 * i] = sample_ids[i].dataset;
    ids[3 * i + 1] = sample_ids[i].shard;
    ids[3 * i + 2] = static_cast<int64_t>(sample_ids[i].index);
  }
  return cells;
}

}  // namespace zephon::daemon
