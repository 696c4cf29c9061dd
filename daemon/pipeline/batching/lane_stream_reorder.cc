// LaneStream's reordering operators (shuffle of samples, ensure_mixture, shuffle of
// rows): kept apart from lane_stream.cc, which plans and materializes batches.
#include <algorithm>
#include <iterator>
#include <vector>

#include "common/logging.h"
#include "daemon/pipeline/batching/lane_stream.h"
#include "daemon/pipeline/ordering/lanes.h"

namespace zephon::pipeline {

void LaneStream::ResetStats() {
  stats_ = std::make_shared<PackStats>();
  if (packer_ != nullptr) synced_ = packer_->counts();
  if (!options_.mixture.enabled) return;
  // The target shown before any group is reordered: the first chunk's (then
  // MixtureStats follows each group's, for a curriculum).
  const uint64_t g = GlobalChunkOfLane(lane_, 0, options_.num_lanes, options_.routing,
                                       options_.routing_seed);
  mixture_stats_ = std::make_shared<MixtureStats>(source_->TargetWeights(g),
                                                  options_.mixture.weight_by_tokens);
}

void LaneStream::ReorderGroupSamples() {
  const ShuffleOptions shuffle = options_.sample_shuffle();
  if (options_.mixture.enabled && options_.mixture_before_shuffle) MixGroupSamples();
  if (shuffle.enabled()) {
    ApplyShuffle(shuffle, ShuffleKey(shuffle.seed, lane_, group_chunk_), &group_samples_);
  }
  if (options_.mixture.enabled && !options_.mixture_before_shuffle) MixGroupSamples();
}

void LaneStream::MixGroupSamples() {
  // The group's target: the mean of its chunks' weights (each chunk holds chunk_size
  // samples, so this is the group's own target).
  std::vector<double> target;
  uint64_t chunks = 0;
  const std::optional<uint64_t> num_chunks = source_->NumChunks();
  for (uint64_t c = group_chunk_; c < group_chunk_ + options_.flush_every_k_chunks; ++c) {
    const uint64_t g = GlobalChunkOfLane(lane_, c, options_.num_lanes, options_.routing,
                                         options_.routing_seed);
    if (num_chunks && g >= *num_chunks) break;
    const std::vector<double> w = source_->TargetWeights(g);
    if (target.empty()) target.assign(w.size(), 0);
    for (size_t k = 0; k < w.size(); ++k) target[k] += w[k];
    ++chunks;
  }
  if (chunks == 0) return;
  std::vector<double> target_shares = target;
  for (double& t : target_shares) t /= static_cast<double>(chunks);
  const auto& datasets = source_->datasets();
  MixtureGroupCounts counts;
  EnsureMixture(
      options_.mixture, target,
      [&](const SampleId& id) { return datasets[id.dataset]->SampleLength(id.shard, id.index); },
      &group_samples_, &counts);
  const bool over = options_.mixture.warn_tolerance &&
                    counts.max_deviation > *options_.mixture.warn_tolerance;
  if (over) {
    SubsystemLogger("pipeline")->warn(
        "ensure_mixture: lane {} flush group at lane chunk {} deviates from the target "
        "mixture by {:.4f} (warn_tolerance {}): a dataset is scarce in this group; a "
        "larger max_buffer_size or flush_every_k_chunks, or token weights in the work "
        "source, reduce it",
        lane_, group_chunk_, counts.max_deviation, *options_.mixture.warn_tolerance);
  }
  // Created lazily: Create replays before ResetStats makes the stream's own.
  if (mixture_stats_ != nullptr) mixture_stats_->AddGroup(counts, over, target_shares);
}

void LaneStream::FeedSample(const SampleId& id) {
  const uint64_t length = source_->datasets()[id.dataset]->SampleLength(id.shard, id.index);
  if (packer_ != nullptr) packer_->Add(id, length, &ready_);  // Null in records mode.
  if (mixture_stats_ != nullptr) mixture_stats_->AddEmitted(id.dataset, length);
}

void LaneStream::PackAndShuffleRows() {
  while (sample_cursor_ < group_samples_.size()) FeedSample(group_samples_[sample_cursor_++]);
  packer_->Flush(&ready_);
  group_flushed_ = true;
  SyncDropCounts();
  std::vector<PackedRecord> rows(std::make_move_iterator(ready_.begin()),
                                 std::make_move_iterator(ready_.end()));
  ApplyShuffle(options_.row_shuffle,
               RowShuffleKey(options_.row_shuffle.seed, lane_, group_chunk_), &rows);
  ready_.assign(std::make_move_iterator(rows.begin()), std::make_move_iterator(rows.end()));
}

}  // namespace zephon::pipeline
