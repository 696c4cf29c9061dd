// What a restore may change in the spec, and the refusal naming what it may not.
//
// A checkpoint stores its spec hash and its resolved spec (CheckpointState.spec_hash,
// .spec). Positions in it are counted in packed records per lane (LaneProgress), so
// the batch operator (microbatch_size, drop_last) does not define the data a lane
// yields, only how records are grouped into batches; mapping_strategy only decides which
// DP group owns which lanes (lanes.h OwnedLanes), as dp_degree does; and
// flush_every_k_chunks may change where every lane stands on a flush-group boundary of
// both values (daemon/pipeline/batching/flush_regroup.h decides that per lane).
//
// CheckResumedSpec accepts a restore when:
//   * the hashes are equal (nothing changed), or
//   * the checkpoint's stored spec reproduces the checkpoint's hash over the datasets
//     opened now (so the stored spec is the one hashed and the files are the same),
//     and that spec with its batch operator, mapping_strategy and flush_every_k_chunks
//     replaced by this Pipeline's hashes to this Pipeline's hash (so nothing else
//     changed).
// (The hashes decide: fields spelled differently that hash alike, such as an older
// checkpoint's unset weight_by against SAMPLES now, are no difference.)
// Otherwise FAILED_PRECONDITION naming the first difference other than those two in
// field order (or, when the fields agree, the datasets' files), as a path ("work_source.seed", "operators[1].pack_flat.max_length"), with
// both values and why it cannot change; "spec hash" stays in the message (users match
// it). Dataset paths and a tokenizer's location are never a difference (the spec hash
// leaves them out too). The attach-time check between ranks of one DP group still
// compares whole spec hashes (peers must batch alike).
// Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_CHECKPOINT_SPEC_CHANGE_H_
#define ZEPHON_DAEMON_CHECKPOINT_SPEC_CHANGE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/dataset.h"
#include "proto/checkpoint.pb.h"
#include "proto/spec.pb.h"

namespace zephon::checkpoint {

// The changes a restore accepted (all false / 0 when the hashes were equal).
struct ResumedSpecChanges {
  // The batch operator differs (microbatch_size and/or drop_last).
  bool batch = false;
  // The checkpoint's flush_every_k_chunks when it differs from this Pipeline's; 0 when
  // equal. The lanes' positions must then be regrouped (pipeline::RegroupLaneStarts).
  uint64_t saved_flush_every_k_chunks = 0;
  // mapping_strategy differs (lanes change owners; each continues where it stood).
  bool mapping = false;
};

// The first data-defining difference between two resolved specs, in field order:
// "work_source.seed: 5 in the checkpoint, 99 now"; empty when there is none. Ignores
// datasets' paths and tokenize's tokenizer_path, tokenizer_json and
// tokenizer_config_json (location, covered by fingerprints).
std::string FirstSpecDifference(const proto::PipelineSpec& saved,
                                const proto::PipelineSpec& now);

// `spec` with its batch operator, mapping_strategy and flush_every_k_chunks taken from
// `from` (both resolved specs): what a restore may change, reverted, so the rest can be
// compared.
proto::PipelineSpec WithBatchingOf(const proto::PipelineSpec& spec,
                                   const proto::PipelineSpec& from);

// See the file comment. `now` is this Pipeline's resolved spec, `now_hash` its
// SpecHash over `datasets` (the datasets opened for it).
absl::StatusOr<ResumedSpecChanges> CheckResumedSpec(
    const proto::CheckpointState& resume, const proto::PipelineSpec& now,
    const std::string& now_hash,
    const std::vector<std::shared_ptr<const pipeline::Dataset>>& datasets);

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_SPEC_CHANGE_H_
