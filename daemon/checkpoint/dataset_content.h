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

// One DatasetContent per dataset, in order. Errors: a shard whose tokens cannot be read
// (object store), naming the dataset.
absl::StatusOr<std::vector<proto::DatasetContent>> DescribeDatasets(
    const std::vector<std::shared_ptr<const pipeline::Dataset>>& datasets);

// OK when `saved` (from a checkpoint) is empty (a checkpoint older than this record) or
// matches `now`; FAILED_PRECONDITION otherwise, naming the first difference: a dataset
// added, removed or renamed, a shard added, removed or renamed, or a shard whose sample
// count, byte size or content checksum changed (old and new values).
absl::Status CompareDatasets(const google::protobuf::RepeatedPtrField<proto::DatasetContent>& saved,
                             const std::vector<proto::DatasetContent>& now);

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_DATASET_CONTENT_H_
