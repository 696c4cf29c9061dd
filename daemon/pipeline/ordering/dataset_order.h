// DatasetOrder: which sample is a dataset's j-th draw, in O(log shards) without replay.
//
// Algorithm (determinism contract): with N = dataset.NumSamples(), draw j is in pass
// e = j / N at position p = j % N. pass_seed = Combine(dataset_seed, e).
//   0. If block_size > 0: p = BlockShufflePosition(p, N, block_size, pass_seed)
//      (block_shuffle.h), i.e. the block shuffle permutes the order built by 1-3.
//   1. Shard order of the pass: position i holds shard
//      Permutation(num_shards, pass_seed).Permute(i) if shuffle_shards, else shard i.
//   2. Prefix sums of shard sizes in that order locate p in (shard s, offset o).
//   3. index = Permutation(size_s, Combine(pass_seed, s)).Permute(o) if
//      shuffle_within_shard, else o.
// So every pass visits each sample exactly once and later passes reshuffle. With
// reshuffle_on_repeat false, e is taken as 0 in every pass_seed above: each pass
// replays the first pass's order.
// The per-pass shard order and prefix sums are cached for the kCachedPasses most
// recently used passes. Thread-safe (the cache is mutex-protected).
#ifndef ZEPHON_DAEMON_PIPELINE_ORDERING_DATASET_ORDER_H_
#define ZEPHON_DAEMON_PIPELINE_ORDERING_DATASET_ORDER_H_

#include <cstdint>
#include <list>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pipeline/formats/dataset.h"
#include "daemon/pipeline/ordering/permutation.h"
#include "daemon/pipeline/sample_id.h"

namespace zephon::pipeline {

class DatasetOrder {
 public:
  static constexpr size_t kCachedPasses = 4;

  // `dataset_index` is stored in the returned SampleIds. `dataset` must outlive this.
  // block_size 0 = no block shuffle.
  DatasetOrder(const Dataset* dataset, uint32_t dataset_index, uint64_t dataset_seed,
               bool shuffle_shards, bool shuffle_within_shard, uint64_t block_size = 0,
               bool reshuffle_on_repeat = true);
  DatasetOrder(const DatasetOrder&) = delete;
  DatasetOrder& operator=(const DatasetOrder&) = delete;

  // The sample of draw j (any j: passes repeat forever): AppendDraws(j, 1).
  SampleId Draw(uint64_t j) const;
  // Appends the samples of draws [first, first + count) to *out, with the pass looked up
  // (and the cache locked) once per pass and the within-shard permutation built once
  // per run of draws in one shard. The one implementation of the algorithm above.
  void AppendDraws(uint64_t first, uint64_t count, std::vector<SampleId>* out) const;
  // The draw of pass `pass` that is sample (shard, index): the j with Draw(j) ==
  // {dataset_index, shard, index} and j / N == pass. REQUIRES: shard < NumShards(),
  // index < ShardSamples(shard).
  uint64_t DrawOf(uint32_t shard, uint64_t index, uint64_t pass) const;

 private:
  struct Pass {
    uint64_t pass = 0;
    std::vector<uint32_t> shard_at;  // shard_at[i]: shard at order position i.
    std::vector<uint64_t> end;       // end[i]: samples in positions [0, i].
  };
  std::shared_ptr<const Pass> GetPass(uint64_t e) const ABSL_LOCKS_EXCLUDED(mu_);
  // Step 3's permutation of `shard` in the order of pass e.
  Permutation WithinShard(uint64_t e, uint32_t shard) const;

  const Dataset* const dataset_;
  const uint32_t dataset_index_;
  const uint64_t dataset_seed_;
  const bool shuffle_shards_;
  const bool shuffle_within_shard_;
  const uint64_t block_size_;
  const bool reshuffle_on_repeat_;
  mutable absl::Mutex mu_;
  mutable std::list<std::shared_ptr<const Pass>> cache_ ABSL_GUARDED_BY(mu_);  // MRU first.
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_ORDERING_DATASET_ORDER_H_
