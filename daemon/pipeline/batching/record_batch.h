// Record batches: a pipeline without a packer delivers each sample as one record of its
// own length (upstream's records, LaneOptions::records). This file turns a record
// BatchPlan into its ragged tensors and bounds their size for the ring:
//   tokens          int32 [n]       every row's tokens back to back
//   record_offsets  int64 [rows+1]  row r is tokens[off[r], off[r+1])
//   loss_mask       uint8 [n]       when the datasets carry one (as tokens)
//   payload         uint8 [m]       with keep_payload: every row's source record, a
//                                   JSON object (UTF-8), back to back
//   payload_offsets int64 [rows+1]  row r's is payload[poff[r], poff[r+1])
// Sizes come from the plan and the datasets' length tables (no token read), so a slot
// can be laid out before it is filled. Thread-safe (pure functions over immutable
// datasets).
#ifndef ZEPHON_DAEMON_PIPELINE_BATCHING_RECORD_BATCH_H_
#define ZEPHON_DAEMON_PIPELINE_BATCHING_RECORD_BATCH_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/pipeline/batching/batch.h"
#include "daemon/pipeline/formats/dataset.h"

namespace zephon::pipeline {

using Datasets = std::vector<std::shared_ptr<const Dataset>>;

// The total tokens and payload bytes of a record plan's rows.
struct RecordSizes {
  uint64_t tokens = 0;
  uint64_t payload_bytes = 0;
};
// A sample the datasets lack counts no payload (the materializers refuse the plan).
RecordSizes RecordSizesOf(const BatchPlan& plan, const Datasets& datasets);

// Where a record batch's tensors go (sized by RecordSizesOf). loss_mask, payload and
// payload_offsets may be null when not wanted.
struct RecordCells {
  int32_t* tokens = nullptr;
  int64_t* record_offsets = nullptr;
  uint8_t* loss_mask = nullptr;
  char* payload = nullptr;
  int64_t* payload_offsets = nullptr;
};

// Reads a record plan's rows into `cells`. Errors: INTERNAL if the plan is not a
// record plan or names a sample the datasets lack (a plan from another source); a
// shard's read error with its code, prefixed with the lane, batch and sample (as
// MaterializeInto's); FAILED_PRECONDITION naming the dataset when the plan wants payloads
// the dataset does not keep.
absl::Status MaterializeRecordsInto(const BatchPlan& plan, const Datasets& datasets,
                                    const RecordCells& cells);
// The same into a Batch (the parallel path): records, record_offsets, chunk_ids and,
// with plan.payload, payload/payload_offsets set.
absl::StatusOr<Batch> MaterializeRecords(const BatchPlan& plan, const Datasets& datasets);

// A shard's error reading sample `id` for `plan`, with its code, prefixed with where
// (lane, batch, sample, dataset): the form both materializers report, which reaches the
// ranks as a ring's poison detail. REQUIRES: id.dataset < datasets.size().
absl::Status SampleReadError(const BatchPlan& plan, const SampleId& id,
                             const Datasets& datasets, const absl::Status& read);

// The longest sample (tokens) and the longest payload (bytes, 0 unless `payload`)
// among `datasets`: what one row of a record batch may need. O(samples) length-table
// reads (no token read).
struct RecordBounds {
  uint64_t tokens = 0;
  uint64_t payload_bytes = 0;
};
RecordBounds LongestRecord(const Datasets& datasets, bool payload);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_BATCHING_RECORD_BATCH_H_
