// SegmentTableOf: the segment boundaries of a batch's records, as pack_sequences
// publishes them ("segment_lengths", daemon/batch_slot.h) for varlen attention.
//
// A record's segments are the pieces of samples the packer placed in it, in row order
// (packers.h); its padding segment, if any, is not one of them (those cells are not
// data). So row r's lengths sum to its valid_tokens, and with positions restarting per
// segment, a segment is exactly a run of positions 0, 1, ..., n - 1.
// Pure function of the plan (no tokens read); thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_BATCHING_SEGMENT_TABLE_H_
#define ZEPHON_DAEMON_PIPELINE_BATCHING_SEGMENT_TABLE_H_

#include "daemon/pipeline/batching/batch.h"

namespace zephon::pipeline {

// The table of `plan` (batch.h's SegmentTable): width = the most non-padding segments
// in one row (at least 1 when plan.rows > 0; a row of padding only has none), lengths
// [rows * width]. REQUIRES: BatchPlan's invariant (segments fill the rows in order,
// none crossing a row boundary).
SegmentTable SegmentTableOf(const BatchPlan& plan);

// The largest width a batch of records of `max_length` cells can have when a record
// holds at most `max_sequences_per_bin` segments (0 = no cap): each segment has at
// least one cell. What a ring slot is sized for.
uint64_t MaxSegmentsPerRecord(uint64_t max_length, uint32_t max_sequences_per_bin);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_BATCHING_SEGMENT_TABLE_H_
