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
constexpr char kRecordOffsets[] = "record_offsets";
constexpr char kPayload[] = "payload";
constexpr char kPayloadOffsets[] = "payload_offsets";
constexpr char kChunkIds[] = "chunk_ids";

// Adds the sample_ids tensor, int64 [n, 3] (dataset, shard, index), holding `ids`.
absl::Status AddSampleIds(const std::vector<pipeline::SampleId>& ids, shm::SlotWriter* slot) {
  ASSIGN_OR_RETURN(void* raw, slot->AddTensor(kSampleIds, shm::DType::kInt64,
                                              {static_cast<uint64_t>(ids.size()), 3}));
  auto* out = static_cast<int64_t*>(raw);
  for (size_t i = 0; i < ids.size(); ++i) {
    out[3 * i] = ids[i].dataset;
    out[3 * i + 1] = ids[i].shard;
    out[3 * i + 2] = static_cast<int64_t>(ids[i].index);
  }
  return absl::OkStatus();
}

}  // namespace

BatchSchema BatchSchema::Of(const pipeline::LaneOptions& lanes) {
  BatchSchema schema;
  schema.rows = lanes.microbatch_size;
  schema.cols = lanes.max_length;
  schema.emit_positions = lanes.emit_positions;
  schema.valid_tokens = lanes.pack.pads();
  schema.loss_mask = lanes.loss_mask;
  if (lanes.records) {
    schema.records = true;
    schema.payload = lanes.payload;
    schema.emit_positions = false;
    schema.valid_tokens = false;
    return schema;
  }
  if (lanes.segments) {
    schema.max_segments =
        pipeline::MaxSegmentsPerRecord(lanes.max_length, lanes.pack.max_sequences_per_bin);
  }
  return schema;
}

std::vector<TensorSchema> BatchSchema::Tensors() const {
  std::vector<TensorSchema> tensors;
  if (records) {
    const uint64_t cells = SaturatingMul(rows, record_tokens);
    const uint64_t offsets = SaturatingAdd(rows, 1);
    tensors.push_back({kTokens, shm::DType::kInt32, {cells}});
    tensors.push_back({kRecordOffsets, shm::DType::kInt64, {offsets}});
    if (loss_mask) tensors.push_back({kLossMask, shm::DType::kUInt8, {cells}});
    if (payload) {
      tensors.push_back(
          {kPayload, shm::DType::kUInt8, {SaturatingMul(rows, record_payload_bytes)}});
      tensors.push_back({kPayloadOffsets, shm::DType::kInt64, {offsets}});
    }
    tensors.push_back({kSampleIds, shm::DType::kInt64, {rows, 3}});
    tensors.push_back({kChunkIds, shm::DType::kInt64, {rows}});
    return tensors;
  }
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

absl::StatusOr<pipeline::RecordCells> AddRecordTensors(
    const BatchSchema& schema, uint32_t rows, const pipeline::RecordSizes& sizes,
    const std::vector<pipeline::SampleId>& sample_ids, const std::vector<int64_t>& chunk_ids,
    shm::SlotWriter* slot) {
  // Checked before any tensor is added, so a refused batch leaves the slot untouched.
  if (!schema.records || rows > schema.rows || sample_ids.size() != rows ||
      chunk_ids.size() != rows || sizes.tokens > SaturatingMul(rows, schema.record_tokens) ||
      sizes.payload_bytes > SaturatingMul(rows, schema.record_payload_bytes)) {
    return absl::InternalError(absl::StrCat(
        "a record batch of ", rows, " rows, ", sizes.tokens, " tokens and ", sizes.payload_bytes,
        " payload bytes does not fit its slot's schema (", schema.rows, " rows of at most ",
        schema.record_tokens, " tokens and ", schema.record_payload_bytes, " payload bytes)"));
  }
  pipeline::RecordCells cells;
  ASSIGN_OR_RETURN(void* tokens, slot->AddTensor(kTokens, shm::DType::kInt32, {sizes.tokens}));
  cells.tokens = static_cast<int32_t*>(tokens);
  const uint64_t offsets = uint64_t{rows} + 1;
  ASSIGN_OR_RETURN(void* off, slot->AddTensor(kRecordOffsets, shm::DType::kInt64, {offsets}));
  cells.record_offsets = static_cast<int64_t*>(off);
  if (schema.loss_mask) {
    ASSIGN_OR_RETURN(void* mask, slot->AddTensor(kLossMask, shm::DType::kUInt8, {sizes.tokens}));
    cells.loss_mask = static_cast<uint8_t*>(mask);
  }
  if (schema.payload) {
    ASSIGN_OR_RETURN(void* payload,
                     slot->AddTensor(kPayload, shm::DType::kUInt8, {sizes.payload_bytes}));
    cells.payload = static_cast<char*>(payload);
    ASSIGN_OR_RETURN(void* toff, slot->AddTensor(kPayloadOffsets, shm::DType::kInt64, {offsets}));
    cells.payload_offsets = static_cast<int64_t*>(toff);
  }
  RETURN_IF_ERROR(AddSampleIds(sample_ids, slot));  // rows entries, checked above
  ASSIGN_OR_RETURN(void* chunks, slot->AddTensor(kChunkIds, shm::DType::kInt64,
                                                 {static_cast<uint64_t>(rows)}));
  if (rows > 0) std::memcpy(chunks, chunk_ids.data(), rows * sizeof(int64_t));
  return cells;
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
  RETURN_IF_ERROR(AddSampleIds(sample_ids, slot));
  return cells;
}

}  // namespace zephon::daemon
