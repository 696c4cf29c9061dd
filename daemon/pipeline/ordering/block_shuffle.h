// Block shuffle: a per-pass shuffle of a dataset's sample order inside fixed blocks.
//
// Option (WorkSourceSpec.shuffle_block_size, kept verbatim in the hashed spec and
// resolved here against the opened datasets):
//   ""       off (block size 0);
//   "N"      decimal N >= 1 samples;
//   "auto"   8 x the largest shard (in samples) over all datasets;
//   "global" the dataset's own sample count (a full shuffle of every pass).
// The resolved size of dataset k is then clamped to [1, N_k] (N_k = its sample count;
// a block of >= N_k samples is one block of N_k, so clamping changes nothing).
// Algorithm (determinism contract), applied after the shard-order and within-shard
// shuffles of DatasetOrder: with B the block size and n the pass length N_k, flattened
// position p of pass e is read from position
//   b * B + Permutation(len_b, Combine(pass_seed ^ kBlockShuffleSalt, b)).Permute(o)
// where b = p / B, o = p % B, len_b = min(B, n - b * B) (the last block may be short)
// and pass_seed = Combine(dataset_seed, e). The salt keeps these permutations
// independent of the within-shard ones (which use Combine(pass_seed, shard)).
// A bijection on [0, n) per pass, O(1) per position, and B = 1 is the identity.
// Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_ORDERING_BLOCK_SHUFFLE_H_
#define ZEPHON_DAEMON_PIPELINE_ORDERING_BLOCK_SHUFFLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/dataset.h"

namespace zephon::pipeline {

inline constexpr uint64_t kBlockShuffleSalt = 0xB10C5AFFULL;
inline constexpr uint64_t kAutoBlockShards = 8;

// Checks the option's syntax. INVALID_ARGUMENT naming work_source.shuffle_block_size
// and the value unless it is "", "auto", "global" or a decimal integer >= 1.
absl::Status ValidateBlockShuffle(const std::string& option);

// Per-dataset block sizes (0 = off), clamped as above. Errors as ValidateBlockShuffle.
absl::StatusOr<std::vector<uint64_t>> ResolveBlockSizes(
    const std::string& option, const std::vector<std::shared_ptr<const Dataset>>& datasets);

// The position inside a pass of length `pass_size` that position p reads from.
// REQUIRES: block_size >= 1, p < pass_size.
uint64_t BlockShufflePosition(uint64_t p, uint64_t pass_size, uint64_t block_size,
                              uint64_t pass_seed);
// The position p with BlockShufflePosition(p, ...) == q. REQUIRES: as above, q < pass_size.
uint64_t BlockShuffleInverse(uint64_t q, uint64_t pass_size, uint64_t block_size,
                             uint64_t pass_seed);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_ORDERING_BLOCK_SHUFFLE_H_
