#include "daemon/pipeline/ordering/dataset_order.h"

#include <algorithm>
#include <optional>

#include "common/mix.h"
#include "daemon/pipeline/ordering/block_shuffle.h"
#include "daemon/pipeline/ordering/permutation.h"

namespace zephon::pipeline {

DatasetOrder::DatasetOrder(const Dataset* dataset, uint32_t dataset_index,
                           uint64_t dataset_seed, bool shuffle_shards,
                           bool shuffle_within_shard, uint64_t block_size,
                           bool reshuffle_on_repeat)
    : dataset_(dataset),
      dataset_index_(dataset_index),
      dataset_seed_(dataset_seed),
      shuffle_shards_(shuffle_shards),
      shuffle_within_shard_(shuffle_within_shard),
      block_size_(block_size),
      reshuffle_on_repeat_(reshuffle_on_repeat) {}

std::shared_ptr<const DatasetOrder::Pass> DatasetOrder::GetPass(uint64_t e) const {
  {
    absl::MutexLock lock(&mu_);
    for (auto it = cache_.begin(); it != cache_.end(); ++it) {
      if ((*it)->pass == e) {
        auto hit = *it;
        cache_.erase(it);
        cache_.push_front(hit);
        return hit;
      }
    }
  }
  auto pass = std::make_shared<Pass>();
  pass->pass = e;
  const uint32_t shards = dataset_->NumShards();
  const Permutation perm(shards, Combine(dataset_seed_, e));
  uint64_t sum = 0;
  for (uint32_t i = 0; i < shards; ++i) {
    const uint32_t s = shuffle_shards_ ? static_cast<uint32_t>(perm.Permute(i)) : i;
    sum += dataset_->ShardSamples(s);
    pass->shard_at.push_back(s);
    pass->end.push_back(sum);
  }
  absl::MutexLock lock(&mu_);
  cache_.push_front(pass);
  if (cache_.size() > kCachedPasses) cache_.pop_back();
  return pass;
}

SampleId DatasetOrder::Draw(uint64_t j) const {
  std::vector<SampleId> one;
  AppendDraws(j, 1, &one);
  return one.front();
}

Permutation DatasetOrder::WithinShard(uint64_t e, uint32_t shard) const {
  return Permutation(dataset_->ShardSamples(shard), Combine(Combine(dataset_seed_, e), shard));
}

void DatasetOrder::AppendDraws(uint64_t first, uint64_t count,
                               std::vector<SampleId>* out) const {
  const uint64_t n = dataset_->NumSamples();
  out->reserve(out->size() + count);
  std::shared_ptr<const Pass> pass;
  std::optional<Permutation> within;  // of (pass e, shard) below
  uint64_t within_pass = 0;
  uint32_t within_shard = 0;
  for (uint64_t j = first; j < first + count; ++j) {
    // Draw j: the steps of the file comment.
    const uint64_t e = reshuffle_on_repeat_ ? j / n : 0;
    uint64_t p = j % n;
    if (block_size_ > 0) p = BlockShufflePosition(p, n, block_size_, Combine(dataset_seed_, e));
    if (pass == nullptr || pass->pass != e) pass = GetPass(e);
    const size_t i = std::upper_bound(pass->end.begin(), pass->end.end(), p) - pass->end.begin();
    const uint32_t shard = pass->shard_at[i];
    const uint64_t offset = p - (i == 0 ? 0 : pass->end[i - 1]);
    uint64_t index = offset;
    if (shuffle_within_shard_) {
      if (!within.has_value() || within_pass != e || within_shard != shard) {
        within.emplace(WithinShard(e, shard));
        within_pass = e;
        within_shard = shard;
      }
      index = within->Permute(offset);
    }
    out->push_back(SampleId{dataset_index_, shard, index});
  }
}

uint64_t DatasetOrder::DrawOf(uint32_t shard, uint64_t index, uint64_t pass) const {
  const uint64_t n = dataset_->NumSamples();
  const uint64_t e = reshuffle_on_repeat_ ? pass : 0;  // the order the pass takes
  // Draw's steps 3, 2, 1, 0 undone.
  const uint64_t offset = shuffle_within_shard_ ? WithinShard(e, shard).Inverse(index) : index;
  const auto order = GetPass(e);
  const size_t i = static_cast<size_t>(
      std::find(order->shard_at.begin(), order->shard_at.end(), shard) - order->shard_at.begin());
  uint64_t p = (i == 0 ? 0 : order->end[i - 1]) + offset;
  if (block_size_ > 0) p = BlockShuffleInverse(p, n, block_size_, Combine(dataset_seed_, e));
  return pass * n + p;
}

}  // namespace zephon::pipeline
