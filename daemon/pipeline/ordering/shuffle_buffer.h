// The deterministic `shuffle(buffer_size, seed, algorithm, warmup_growth)` operator.
//
// Applied to the items of one flush group of one lane (sample ids before pack_flat,
// packed records after it); operator state never crosses a flush group, which keeps
// lane positions tiny. Every algorithm is a function of the item COUNT n and a key
// only (never of the items), so it is computed as an order of indices (ShuffleOrder)
// and applied to any item type. key = Combine(Combine(seed, lane), flush_group_first_chunk)
// (ShuffleKey; a shuffle after packing uses RowShuffleKey, salted, so the two
// positions of one seed are independent). A counter i starts at 0 in each group.
//   * streaming (the algorithm of every spec without `algorithm`; upstream's name for
//     a deterministic reservoir, without upstream's warm-up ramp): each input is
//     appended while the buffer holds < buffer_size items; once full, each new input
//     evicts buffer[r], r = Combine(key, i++) % buffer_size, which is emitted, and the
//     input takes its place. Draining (group end): while non-empty,
//     r = Combine(key, i++) % size; emit buffer[r]; buffer[r] = last; pop the last.
//   * block: tumbling blocks of buffer_size items (the group's last one may be
//     short); block b (0-based within the group) of length len is emitted in the order
//     Permutation(len, Combine(key, b)) (permutation.h): its j-th output is its
//     Permute(j)-th input.
//   * block_warmup: as block, with block sizes s_0 = FirstWarmupBlock(buffer_size) =
//     max(1, min(128, buffer_size / 16)) (upstream's warm-up window), then
//     s_{b+1} = min(buffer_size, max(s_b + 1, floor(s_b * warmup_growth))): early
//     output leaves soon after a group starts instead of after buffer_size arrivals.
//     The ramp restarts at every flush group.
// Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_ORDERING_SHUFFLE_BUFFER_H_
#define ZEPHON_DAEMON_PIPELINE_ORDERING_SHUFFLE_BUFFER_H_

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/sample_id.h"

namespace zephon::pipeline {

enum class ShuffleAlgorithm { kStreaming, kBlock, kBlockWarmup };

inline constexpr double kDefaultWarmupGrowth = 1.5;
// warmup_growth must be in (1, kMaxWarmupGrowth]: 1 would never ramp, and a larger
// factor reaches buffer_size after the first block anyway.
inline constexpr double kMaxWarmupGrowth = 1024.0;

struct ShuffleOptions {
  uint64_t buffer_size = 0;  // 0 = no shuffle at this position.
  uint64_t seed = 0;
  ShuffleAlgorithm algorithm = ShuffleAlgorithm::kStreaming;
  double warmup_growth = kDefaultWarmupGrowth;  // block_warmup only.

  bool enabled() const { return buffer_size > 0; }
};

// "" and "streaming" -> kStreaming, "block", "block_warmup"; INVALID_ARGUMENT naming
// the value and the choices otherwise.
absl::StatusOr<ShuffleAlgorithm> ParseShuffleAlgorithm(std::string_view name);
const char* ShuffleAlgorithmName(ShuffleAlgorithm algorithm);

uint64_t ShuffleKey(uint64_t seed, uint32_t lane, uint64_t flush_group_first_chunk);
// The key of a shuffle after pack_flat (rows).
uint64_t RowShuffleKey(uint64_t seed, uint32_t lane, uint64_t flush_group_first_chunk);

// block_warmup's first block size.
uint64_t FirstWarmupBlock(uint64_t buffer_size);

// *order = the input index of each output position, for n items (a permutation of
// [0, n)). REQUIRES: options.enabled().
void ShuffleOrder(const ShuffleOptions& options, uint64_t key, uint64_t n,
                  std::vector<uint64_t>* order);

// Reorders *items in place by ShuffleOrder. REQUIRES: options.enabled().
template <typename T>
void ApplyShuffle(const ShuffleOptions& options, uint64_t key, std::vector<T>* items) {
  std::vector<uint64_t> order;
  ShuffleOrder(options, key, items->size(), &order);
  std::vector<T> out;
  out.reserve(items->size());
  for (uint64_t i : order) out.push_back(std::move((*items)[i]));
  items->swap(out);
}

// The streaming algorithm on sample ids (ApplyShuffle with kStreaming).
// REQUIRES: buffer_size >= 1.
void BufferShuffle(uint64_t buffer_size, uint64_t key, std::vector<SampleId>* items);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_ORDERING_SHUFFLE_BUFFER_H_
