// Batch: one microbatch produced by a lane, plus where the lane stood when it began.
// BatchPlan: the same microbatch before its tokens are read (see below).
// Both carry `end`, the lane position right after the batch: a lane restarted at `end`
// with first_batch_index = lane_batch_index + 1 regenerates the lane's following
// batches exactly (LaneStream::Create), so (lane_batch_index + 1, end) is the lane's
// checkpointable progress once this batch has been taken (proto::LaneProgress).
//
// tokens and positions are row-major [rows, cols] (cols = pack_flat max_length).
// A row ends in its padding cells, if any (algorithms other than "wrap").
// sample_ids lists every sample that contributed >= 1 token, in order of first
// appearance, without duplicates.
// Record batches (no packer: `records`): cols is 0 and rows are ragged: row r's tokens
// (and loss mask) are tokens[record_offsets[r], record_offsets[r + 1]); sample_ids and
// chunk_ids hold one entry per row (repeats kept); with `payload`, row r's source record
// (a JSON object) is payload[payload_offsets[r], payload_offsets[r + 1]). No positions, padding or valid_tokens.
// Plain value types; thread-compatible.
#ifndef ZEPHON_DAEMON_PIPELINE_BATCHING_BATCH_H_
#define ZEPHON_DAEMON_PIPELINE_BATCHING_BATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "daemon/pipeline/sample_id.h"

namespace zephon::pipeline {

// A resumable lane position: the lane chunk index where a flush group starts and the
// number of packed records of that group already consumed. A lane restarted at this
// position (LaneStream::Create with `start`) reproduces the stream from there, because
// all operator state is reset at flush-group boundaries.
// Positions are not unique: {f, N} with N the record count of group f and
// {f + flush_every_k_chunks, 0} restart identically.
struct LanePosition {
  uint64_t flush_group_chunk = 0;
  uint64_t records_into_group = 0;

  friend bool operator==(const LanePosition& a, const LanePosition& b) {
    return a.flush_group_chunk == b.flush_group_chunk &&
           a.records_into_group == b.records_into_group;
  }
};

// Each row's segment lengths (pack_sequences): row-major [rows, width], row r's
// non-padding segments' counts in row order, then zeros; width is the most segments
// any row of the batch has (>= 1 for a batch with rows). Built by SegmentTableOf
// (segment_table.h).
struct SegmentTable {
  uint32_t width = 0;
  std::vector<int32_t> lengths;
};

struct Batch {
  uint32_t lane = 0;
  uint64_t lane_batch_index = 0;
  uint32_t rows = 0;
  uint32_t cols = 0;
  std::vector<int32_t> tokens;
  std::vector<int32_t> positions;
  // [rows]: each row's cells that are not padding (== cols unless the algorithm pads).
  std::vector<int32_t> valid_tokens;
  // [rows, cols] when the plan has loss_mask (else empty): 1 where the token is trained
  // on, 0 where it is masked (the dataset's mask) and at every padding cell.
  std::vector<uint8_t> loss_mask;
  // When the plan has segment_lengths (else empty).
  SegmentTable segments;
  std::vector<SampleId> sample_ids;
  // Record batches only (see the file comment).
  bool records = false;
  std::vector<int64_t> record_offsets;  // [rows + 1]
  std::vector<int64_t> chunk_ids;       // [rows]
  std::string payload;                  // with payload
  std::vector<int64_t> payload_offsets;  // [rows + 1] with payload
  // The lane position just before this batch's first record.
  LanePosition start;
  // The lane position right after this batch's last record (see the file comment).
  LanePosition end;
};

// A piece of one sample placed in a row: tokens [offset, offset + count) of `id`.
// Its positions are 0, 1, ..., count - 1 (pack_flat restarts them per piece).
// A padding segment (`padding`, id and offset unused) is `count` cells of the plan's
// pad_token_id at a row's end; its positions count 0, 1, ... as well, so it is one more
// segment and never extends the document before it.
struct Segment {
  SampleId id;
  uint64_t offset = 0;
  uint64_t count = 0;
  bool padding = false;

  friend bool operator==(const Segment& a, const Segment& b) {
    return a.id == b.id && a.offset == b.offset && a.count == b.count &&
           a.padding == b.padding;
  }
};

// Everything a Batch is, except its tokens: the packing/batching decisions, which need
// only sample ids and lengths. Materialize (lane_stream.h) turns it into the Batch.
// Invariant: `segments` fill the rows in order, row r being cells [r*cols, (r+1)*cols);
// no segment crosses a row boundary and the counts sum to rows * cols.
struct BatchPlan {
  uint32_t lane = 0;
  uint64_t lane_batch_index = 0;
  uint32_t rows = 0;
  uint32_t cols = 0;
  std::vector<Segment> segments;
  int32_t pad_token_id = 0;          // The value of padding segments' cells.
  bool loss_mask = false;            // The batch carries a loss mask (LaneOptions).
  bool segment_lengths = false;      // The batch carries a SegmentTable (pack_sequences).
  // A record batch: cols 0, one whole-sample segment per row (Batch's file comment).
  bool records = false;
  bool payload = false;              // Record batches: rows carry their source record.
  std::vector<SampleId> sample_ids;  // As Batch::sample_ids.
  std::vector<uint64_t> chunk_ids;   // Record batches: each row's global chunk.
  LanePosition start;                // As Batch::start.
  LanePosition end;                  // As Batch::end.
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_BATCHING_BATCH_H_
