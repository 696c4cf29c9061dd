// How one batch is laid out in a ring slot, and so how big a slot must be.
//
// BatchSchema is the single source of both: the producer writes exactly the tensors it
// lists (AddBatchTensors), and the ring is sized from SlotPayloadBytes of the same
// schema, so the ring size and the tensor layout cannot drift apart. Tensors, in slot
// order:
//   tokens      int32 [rows, cols]
//   positions   int32 [rows, cols]   only when emit_positions
//   valid_tokens int32 [rows]        only when the pack_flat algorithm pads: each row's
//                                    cells that are not padding (they come first)
//   loss_mask   uint8 [rows, cols]   only when a dataset carries a loss mask (SFT): 1 =
//                                    trained on, 0 = masked (and every padding cell)
//   segment_lengths int32 [rows, w]  only with pack_sequences: each row's segments'
//                                    lengths (pieces of samples, not padding) in row
//                                    order, then 0s; w = the batch's most segments in a
//                                    row (pipeline::SegmentTable), at most max_segments
//   sample_ids  int64 [n, 3]         (dataset, shard, index) of each contributing sample
// with rows <= microbatch_size (a short last batch has fewer), cols = max_length and
// n <= rows * cols (a batch lists each contributing sample once, and each contributed
// at least one token, i.e. one cell).
// Record batches (no packer: `records`) are ragged instead (record_batch.h):
//   tokens int32 [t], record_offsets int64 [rows+1], loss_mask uint8 [t] (as above),
//   payload uint8 [b] and payload_offsets int64 [rows+1] (keep_payload: each row's source
//   record as a JSON object), sample_ids int64
//   [rows, 3] (row r's sample), chunk_ids int64 [rows]
// with t <= rows * record_tokens and b <= rows * record_payload_bytes, the longest sample
// and payload of the datasets (pipeline::LongestRecord), set once they are open.
// Value types and pure functions; thread-compatible.
#ifndef ZEPHON_DAEMON_BATCH_SLOT_H_
#define ZEPHON_DAEMON_BATCH_SLOT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/batching/lane_stream.h"
#include "daemon/pipeline/batching/record_batch.h"
#include "daemon/pipeline/sample_id.h"
#include "shm/ring_layout.h"
#include "shm/ring_writer.h"

namespace zephon::daemon {

// One tensor of the schema, with its largest shape.
struct TensorSchema {
  std::string name;
  shm::DType dtype;
  std::vector<uint64_t> max_shape;
};

struct BatchSchema {
  uint64_t rows = 0;  // microbatch_size
  uint64_t cols = 0;  // pack_flat max_length
  bool emit_positions = true;
  bool valid_tokens = false;  // pack_flat pads (every algorithm but wrap)
  bool loss_mask = false;     // a dataset carries a loss mask (LaneOptions::loss_mask)
  // pack_sequences: the widest segment_lengths row (pipeline::MaxSegmentsPerRecord);
  // 0 = no segment_lengths tensor (pack_flat).
  uint64_t max_segments = 0;
  // Record batches (LaneOptions::records): cols is 0 and rows are ragged, each at most
  // record_tokens tokens and record_payload_bytes of payload (with `payload`).
  bool records = false;
  bool payload = false;
  uint64_t record_tokens = 0;
  uint64_t record_payload_bytes = 0;

  // The schema of the batches a lane with `lanes` options produces (a record schema's
  // bounds are left 0 for the caller to set from the datasets).
  static BatchSchema Of(const pipeline::LaneOptions& lanes);

  // The tensors in slot order, at their largest shapes.
  std::vector<TensorSchema> Tensors() const;
  // The slot payload that holds the largest batch, exactly: each tensor at the next
  // shm::kTensorAlignment boundary, as SlotWriter::AddTensor places them. Saturates at
  // UINT64_MAX (a ring that large fails to be created, naming its size).
  uint64_t SlotPayloadBytes() const;
};

// Where the producer writes a batch's token and position cells.
struct BatchCells {
  int32_t* tokens = nullptr;
  int32_t* positions = nullptr;  // null unless the schema emits positions
  int32_t* valid_tokens = nullptr;  // [rows]; null unless the schema has valid_tokens
  uint8_t* loss_mask = nullptr;     // [rows, cols]; null unless the schema has loss_mask
};

// Adds a batch's tensors to `slot` in schema order, at shape [rows, schema.cols], and
// fills sample_ids and (when the schema has max_segments) segment_lengths from
// `segments`. Errors: those of SlotWriter::AddTensor (RESOURCE_EXHAUSTED if the slot is
// smaller than the schema's SlotPayloadBytes); INTERNAL if the schema wants segment
// lengths and `segments` is null, or wider than max_segments, or not rows rows.
// REQUIRES: rows <= schema.rows; sample_ids.size() <= rows * schema.cols.
absl::StatusOr<BatchCells> AddBatchTensors(const BatchSchema& schema, uint32_t rows,
                                           const std::vector<pipeline::SampleId>& sample_ids,
                                           const pipeline::SegmentTable* segments,
                                           shm::SlotWriter* slot);

// Adds a record batch's tensors to `slot` in schema order (ragged; sizes from
// pipeline::RecordSizesOf) and fills sample_ids and chunk_ids. Errors: those of
// SlotWriter::AddTensor; INTERNAL (before any tensor is added) if the sizes exceed the
// schema's bounds or sample_ids / chunk_ids do not hold `rows` entries.
// REQUIRES: a record schema.
absl::StatusOr<pipeline::RecordCells> AddRecordTensors(
    const BatchSchema& schema, uint32_t rows, const pipeline::RecordSizes& sizes,
    const std::vector<pipeline::SampleId>& sample_ids, const std::vector<int64_t>& chunk_ids,
    shm::SlotWriter* slot);

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_BATCH_SLOT_H_
