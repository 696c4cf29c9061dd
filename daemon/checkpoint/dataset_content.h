// What a checkpoint records of its datasets' files, and the restore-time comparison.
//
// The spec hash covers each dataset's file names, sample counts and byte sizes but not
// where the files live (an S3 copy and a disk copy share checkpoints) and not their
// bytes, so a dataset rewritten in place with the same sizes used to restore silently.
// A checkpoint therefore also carries, per dataset and shard, the file name, samples,
// bytes and a content checksum (Dataset::ShardContentChecksum: the sample-length table,
// i.e. the Megatron .idx / JSONL line index, plus the tokens of the first, middle and
// last sample), all independent of location and mtime. Restore compares them and the
// refusal names the dataset, the shard file and the property that changed.
// A work source that weighs by tokens (weight_by TOKENS) also records each dataset's
// tokens-per-sample estimate, and restore refuses a different one: the mixture's sample
// weights come from it, so another value would draw another mixture after the resume.
// We refuse rather than reuse the checkpoint's value because the estimate is a pure
// function of the files (pipeline/ordering/token_estimate.h): a different value means
// the data (or the estimation rule of another zephond version) changed under the run,
// and positions into changed data are not a resume.
// Pure functions over immutable datasets; thread-safe.
#ifndef ZEPHON_DAEMON_CHECKPOINT_DATASET_CONTENT_H_
#define ZEPHON_DAEMON_CHECKPOINT_DATASET_CONTENT_H_

#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/dataset.h"
#include "proto/checkpoint.pb.h"

namespace zephon::checkpoint {

// One DatasetContent per dataset, in order; tokens_per_sample set when `weight_by` is
// TOKENS. Errors: a shard whose tokens cannot be read (object store), naming the
// dataset.
absl::StatusOr<std::vector<proto::DatasetContent>> DescribeDatasets(
    const std::vector<std::shared_ptr<const pipeline::Dataset>>& datasets,
    proto::WorkSourceSpec::WeightBy weight_by);

// OK when `saved` (from a checkpoint) is empty (a checkpoint older than this record) or
// matches `now`; FAILED_PRECONDITION otherwise, naming the first difference: a dataset
// added, removed or renamed, a shard added, removed or renamed, or a shard whose sample
// count, byte size or content checksum changed (old and new values), or a
// tokens_per_sample estimate that both record and that differs (old and new values).
absl::Status CompareDatasets(const google::protobuf::RepeatedPtrField<proto::DatasetContent>& saved,
                             const std::vector<proto::DatasetContent>& now);

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_DATASET_CONTENT_H_
