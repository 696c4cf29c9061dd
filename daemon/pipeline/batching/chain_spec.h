// The reordering operators of a lane's chain (shuffle, ensure_mixture) parsed from the
// spec, and where the chain grammar lets them sit:
//
//   [tokenize] {shuffle | ensure_mixture}* [pack_flat [shuffle]] batch
//
// (Without a packer the batches are records, whole samples: lane_stream.h.)
//
// (pack_sequences sits where pack_flat does: the same packing, published with segment
// boundaries; "pack_flat" below stands for either.)
//
// Before pack_flat: at most one shuffle (of samples) and at most one ensure_mixture,
// in either order (applied in the order given). After pack_flat: at most one shuffle
// (of packed rows). Refused, naming the operator index: a second shuffle or
// ensure_mixture in one position; ensure_mixture after pack_flat (a packed row already
// mixes several datasets' tokens and a flush group's mixture is fixed by then:
// reordering whole rows cannot correct it); anything after batch (a shuffle there
// would reorder whole batches: put it before batch to shuffle rows); ensure_mixture
// weighing samples when the work source weighs tokens (its target is then token
// shares). Thread-safe (pure functions).
#ifndef ZEPHON_DAEMON_PIPELINE_BATCHING_CHAIN_SPEC_H_
#define ZEPHON_DAEMON_PIPELINE_BATCHING_CHAIN_SPEC_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/pipeline/ordering/ensure_mixture.h"
#include "daemon/pipeline/ordering/shuffle_buffer.h"
#include "proto/spec.pb.h"

namespace zephon::pipeline {

inline constexpr char kChainGrammar[] =
    "operators are [tokenize], {shuffle, ensure_mixture} (each at most once, either "
    "order), [pack_flat or pack_sequences, [shuffle]], batch (no packer: record "
    "batches)";

struct ReorderStages {
  ShuffleOptions sample_shuffle;  // Before pack_flat (buffer_size 0 = none).
  EnsureMixtureOptions mixture;   // enabled = in the chain.
  bool mixture_before_shuffle = false;
  ShuffleOptions row_shuffle;  // Between pack_flat and batch.
};

// A resolved ShuffleSpec, validated (buffer_size >= 1; a known algorithm;
// warmup_growth in (1, kMaxWarmupGrowth] for block_warmup, refused with the others).
// INVALID_ARGUMENT naming "operators[index] shuffle.<field>".
absl::StatusOr<ShuffleOptions> ShuffleOptionsFromSpec(const proto::ShuffleSpec& spec,
                                                      int index);

// Parses the operators before pack_flat from ops[*i] on, advancing *i past them.
absl::Status ParsePrePackStages(const proto::PipelineSpec& spec, int* i,
                                ReorderStages* stages);
// Parses an optional shuffle at ops[*i] (right after pack_flat), advancing *i past it,
// and refuses a second one or an ensure_mixture there.
absl::Status ParseRowShuffle(const proto::PipelineSpec& spec, int* i, ReorderStages* stages);
// The refusal for operators[i] following batch.
absl::Status AfterBatchError(const proto::PipelineSpec& spec, int i);

// Canonical form before hashing: shuffle.algorithm "streaming" -> unset (so a spec
// naming it hashes as every spec did before algorithms existed), block_warmup's
// warmup_growth default, ensure_mixture's defaults.
void ResolveReorderDefaults(proto::OperatorSpec* op);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_BATCHING_CHAIN_SPEC_H_
