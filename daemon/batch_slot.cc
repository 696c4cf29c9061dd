#include "daemon/batch_slot.h"

#include <cstring>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"

#include "common/status_macros.h"
#include "daemon/pipeline/batching/segment_table.h"

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
constexpr char kSegmentLengths[] = "segment_lengths";

}  // namespace

BatchSchema BatchSchema::Of(const pipeline::LaneOptions& lanes) {
  BatchSchema schema;
  schema.rows = lanes.microbatch_size;
  schema.cols = lanes.max_length;
  schema.emit_positions = lanes.emit_positions;
  schema.valid_tokens = lanes.pack.pads();
  schema.loss_mask = lanes.loss_mask;
  if (lanes.segments) {
    schema.max_segments =
        pipeline::MaxSegmentsPerRecord(lanes.max_length, lanes.pack.max_sequences_per_bin);
  }
  return schema;
}

std::vector<TensorSchema> BatchSchema::Tensors() const {
  std::vector<TensorSchema> tensors;
  tensors.push_back({kTokens, shm::DType::kInt32, {rows, cols}});
  if (emit_positions) tensors.push_back({kPositions, shm::DType::kInt32, {rows, cols}});
  if (valid_tokens) tensors.push_back({kValidTokens, shm::DType::kInt32, {rows}});
  if (loss_mask) tensors.push_back({kLossMask, shm::DType::kUInt8, {rows, cols}});
  if (max_segments > 0) {
    tensors.push_back({kSegmentLengths, shm::DType::kInt32, {rows, max_segments}});
  }
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
                                           const pipeline::SegmentTable* segments,
                                           shm::SlotWriter* slot) {
  // Checked before any tensor is added, so a refused batch leaves the slot untouched.
  if (schema.max_segments > 0 &&
      (segments == nullptr || segments->width > schema.max_segments ||
       segments->lengths.size() != uint64_t{rows} * segments->width)) {
    return absl::InternalError(absl::StrCat(
        "segment_lengths of a ", rows, "-row batch: ",
        segments == nullptr
            ? std::string("missing")
            : absl::StrCat(segments->lengths.size(), " lengths of width ", segments->width),
        " (at most ", schema.max_segments, " wide)"));
  }
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
  if (schema.max_segments > 0) {
    ASSIGN_OR_RETURN(void* lengths,
                     slot->AddTensor(kSegmentLengths, shm::DType::kInt32,
                                     {rows, static_cast<uint64_t>(segments->width)}));
    std::memcpy(lengths, segments->lengths.data(), segments->lengths.size() * sizeof(int32_t));
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
