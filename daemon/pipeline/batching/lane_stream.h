// LaneStream: one lane's operator chain, producing that lane's fixed batch sequence.
//
// Contract (determinism; depends only on spec, seed and lane id, never on D):
//   * Lane l's chunks: lane chunk index c = 0, 1, ... is global chunk
//     GlobalChunkOfLane(l, c); the lane ends at the first c whose chunk is >= NumChunks.
//   * Flush groups: lane chunks [f, f + flush_every_k_chunks) with f a multiple of
//     flush_every_k_chunks. All operator state (shuffle buffer, pack leftovers) is reset
//     at every flush-group boundary.
//   * Per flush group: its sample ids in chunk order -> the optional shuffle and
//     ensure_mixture in the spec's order (shuffle_buffer.h, ensure_mixture.h; the
//     mixture's target is WorkSource::TargetWeights averaged over the group's chunks)
//     -> pack_flat (packers.h: a fresh Packer per group, flushed at
//     the group's end, so every open bin is emitted, padded, there). "wrap": the
//     samples' tokens as one FIFO stream cut into records of exactly max_length tokens,
//     documents split across records; tokens left at the group end that do not fill a
//     record are dropped and counted in dropped_tokens(). The other algorithms pad:
//     a record's padding cells (pad_token_id) follow its samples. Positions count
//     0, 1, ... from the start of each piece of a document inside a record, and from
//     the start of the padding. Empty samples contribute nothing.
//   * Optional shuffle of rows (between pack_flat and batch): the group is packed
//     whole when loaded (lengths only), its records reordered by ShuffleOrder with
//     RowShuffleKey, then served in that order; LanePosition.records_into_group counts
//     records in the shuffled order, so a restore replays (packs, permutes, skips)
//     one flush group, as without it.
//   * Without pack_flat (LaneOptions::records, upstream's record batches): every sample
//     of the group, in the order above, is one record of its own length (an empty
//     sample is an empty record); there is no padding and nothing is dropped. Rows are
//     ragged (BatchPlan::records), each carries its sample id and the global chunk it
//     came from.
//   * batch: consecutive records, microbatch_size per batch; batches may span flush
//     groups. At lane end a short batch is dropped if drop_last, else emitted.
//     NOTE: proto3 has no presence for BatchSpec.drop_last, so an unset field means
//     false (emit the short batch); clients wanting the upstream default send true.
//   * Plan / materialize split: every decision above needs only sample ids and
//     lengths, so NextPlan() yields a BatchPlan (cheap, sequential) and Materialize()
//     reads the tokens (the IO, copy and dtype conversion). Materialize is a pure
//     function of the plan and the immutable datasets, so plans may be materialized on
//     any thread, in any order, with identical bytes. Next() == Materialize(NextPlan()).
// LaneStream: single-owner (not thread-safe); the shared WorkSource is thread-safe.
// Materialize: thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_BATCHING_LANE_STREAM_H_
#define ZEPHON_DAEMON_PIPELINE_BATCHING_LANE_STREAM_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/batching/batch.h"
#include "daemon/pipeline/batching/mixture_stats.h"
#include "daemon/pipeline/batching/packers.h"
#include "daemon/pipeline/formats/dataset.h"
#include "daemon/pipeline/ordering/ensure_mixture.h"
#include "daemon/pipeline/ordering/lanes.h"
#include "daemon/pipeline/ordering/shuffle_buffer.h"
#include "daemon/pipeline/ordering/work_source.h"
#include "proto/spec.pb.h"

namespace zephon::pipeline {

inline constexpr uint32_t kDefaultFlushEveryKChunks = 8;
// The longest record: its cells, positions and segment lengths are int32.
inline constexpr uint64_t kMaxPackLength = (uint64_t{1} << 31) - 1;

// The per-lane knobs of a spec, validated.
struct LaneOptions {
  uint32_t num_lanes = 1;
  LaneRouting routing = proto::PipelineSpec::PERMUTE;
  uint64_t routing_seed = 0;  // work_source.seed
  uint64_t flush_every_k_chunks = kDefaultFlushEveryKChunks;
  uint64_t shuffle_buffer_size = 0;  // 0 = no shuffle operator.
  uint64_t shuffle_seed = 0;
  uint64_t max_length = 0;
  // pack_flat's algorithm and its options (pack.max_length == max_length).
  PackOptions pack;
  // The packing operator is pack_sequences: batches also publish each record's segment
  // lengths (BatchPlan::segment_lengths). The records are pack_flat's.
  bool segments = false;
  uint64_t microbatch_size = 0;
  bool drop_last = false;
  // pack_flat.emit_positions (unset = true): whether batches publish "positions".
  bool emit_positions = true;
  // The shuffle before pack_flat: its algorithm (buffer_size and seed above).
  ShuffleAlgorithm shuffle_algorithm = ShuffleAlgorithm::kStreaming;
  double shuffle_warmup_growth = kDefaultWarmupGrowth;
  // ensure_mixture (before pack_flat; enabled = in the chain) and whether it precedes
  // the shuffle there.
  EnsureMixtureOptions mixture;
  bool mixture_before_shuffle = false;
  // The shuffle between pack_flat and batch, of packed rows (buffer_size 0 = none).
  ShuffleOptions row_shuffle;
  // No packer in the chain: records are whole samples (see the file comment);
  // max_length is 0 and pack, segments, emit_positions and row_shuffle are unused.
  bool records = false;
  // Records also carry their source record (tokenize keep_payload; records only).
  bool payload = false;

  // The shuffle before pack_flat as ShuffleOptions (buffer_size 0 = none).
  ShuffleOptions sample_shuffle() const;
  // Some dataset carries a loss mask (SpecHasLossMask): batches publish "loss_mask".
  bool loss_mask = false;

  // The only reader of the operator list. REQUIRES a resolved spec (ResolvePipeline
  // calls this after filling the defaults; others use ResolvedPipeline::lanes).
  // Operators must follow the chain grammar of chain_spec.h ([tokenize], {shuffle,
  // ensure_mixture}, [pack_flat or pack_sequences, [shuffle]], batch; tokenize is read
  // only for keep_payload, refused with a packer); INVALID_ARGUMENT naming the operator
  // index and value otherwise (also:
  // max_length in [2, kMaxPackLength], microbatch_size >= 1, buffer_size >= 1, a known algorithm with
  // its fields (pad_token_id >= 0 required by all but wrap; num_bins 1..kMaxNumBins
  // for first_fit/best_fit; candidate_pool_size 1..kMaxCandidatePoolSize and
  // max_candidate_age >= 1 for best_fit_wrap; a field of another algorithm refused),
  // CheckCanonicalReplicas (lanes.h) on the spec's lane count).
  static absl::StatusOr<LaneOptions> FromSpec(const proto::PipelineSpec& spec);
  std::string Describe() const;
};

// Whether the batches of `spec` carry a loss mask: a dataset sets loss_mask_field, or
// the tokenize operator sets loss_on. Datasets without one are then all ones.
bool SpecHasLossMask(const proto::PipelineSpec& spec);

// A snapshot of PackStats (below); fill rate = tokens / (tokens + padding_cells).
struct PackFigures {
  uint32_t lane = 0;
  uint64_t records = 0;
  uint64_t tokens = 0;
  uint64_t padding_cells = 0;
  uint64_t dropped_tokens = 0;
  uint64_t dropped_samples = 0;
  uint64_t split_samples = 0;
};

// The figures of `lanes` added up (lane = 0).
PackFigures SumPackFigures(const std::vector<PackFigures>& lanes);

// One lane's packing figures. Atomic so that status and metrics read them while the
// lane's owner plans.
struct PackStats {
  PackFigures Snapshot(uint32_t lane) const;

  std::atomic<uint64_t> records{0};        // Records in batches returned.
  std::atomic<uint64_t> tokens{0};         // Their cells holding sample tokens.
  std::atomic<uint64_t> padding_cells{0};  // Their pad cells.
  std::atomic<uint64_t> dropped_tokens{0};
  std::atomic<uint64_t> dropped_samples{0};
  std::atomic<uint64_t> split_samples{0};
};

class LaneStream {
 public:
  // Starts lane `lane` at `start` (default: the beginning); the first batch returned
  // is numbered `first_batch_index`. Restarting at a batch's `end` with
  // first_batch_index = its lane_batch_index + 1 reproduces every later batch of the
  // lane byte for byte (a restart at the lane's end yields nullopt). Cost: replays at
  // most the `start.records_into_group` records of one flush group (sample lengths
  // only, no token reads), never the lane from its beginning.
  // Errors (INVALID_ARGUMENT, naming the lane): lane >= num_lanes;
  // start.flush_group_chunk not a multiple of flush_every_k_chunks; the flush group has
  // fewer than start.records_into_group records (not a position of this lane).
  static absl::StatusOr<std::unique_ptr<LaneStream>> Create(
      std::shared_ptr<const WorkSource> source, const LaneOptions& options, uint32_t lane,
      LanePosition start = {}, uint64_t first_batch_index = 0);

  // The records of lane `lane`'s flush group that starts at lane chunk `group_chunk`
  // (a multiple of flush_every_k_chunks), what a position's records_into_group counts,
  // or nullopt when that group has no chunks (the lane ended before it). Counted from
  // sample lengths alone (no token reads): the group's ordering operators and packer run,
  // the records are counted and dropped. Errors: Create's.
  static absl::StatusOr<std::optional<uint64_t>> GroupRecords(
      std::shared_ptr<const WorkSource> source, const LaneOptions& options, uint32_t lane,
      uint64_t group_chunk);

  // The next batch, or nullopt once the lane is exhausted (and forever after).
  // Errors: those of Materialize.
  absl::StatusOr<std::optional<Batch>> Next();
  // The plan of the next batch (what Next() would return, tokens not yet read), or
  // nullopt once the lane is exhausted. Calls to Next and NextPlan share one cursor.
  absl::StatusOr<std::optional<BatchPlan>> NextPlan();

  uint32_t lane() const { return lane_; }
  // Where the next batch would start (== the `end` of the last batch returned, unless
  // a NextPlan since then found the lane exhausted).
  LanePosition position() const { return {group_chunk_, records_in_group_}; }
  // The lane_batch_index the next batch will carry.
  uint64_t next_batch_index() const { return next_batch_index_; }
  // Tokens dropped by pack_flat (wrap's group tails, oversized samples dropped).
  uint64_t dropped_tokens() const { return stats_->dropped_tokens.load(std::memory_order_relaxed); }
  // What this lane has packed into the batches returned so far (and dropped on the
  // way), since Create (a restored stream starts from zero). Thread-safe: the
  // counters may be read by any thread while the owner plans.
  std::shared_ptr<const PackStats> stats() const { return stats_; }
  // The mixture ensure_mixture achieved on this lane (mixture_stats.h); null when the
  // chain has no ensure_mixture. Thread-safe like stats().
  std::shared_ptr<const MixtureStats> mixture_stats() const { return mixture_stats_; }

 private:
  struct Record {
    std::vector<Segment> segments;     // Sum of counts == max_length (packed).
    std::vector<SampleId> sample_ids;  // Contributors in order, adjacent duplicates removed.
    uint64_t chunk = 0;                // Records mode: the sample's global chunk.
  };

  LaneStream(std::shared_ptr<const WorkSource> source, const LaneOptions& options,
             uint32_t lane);
  // Loads the flush group starting at group_chunk_ (and a fresh packer); false if it
  // has no chunks.
  bool LoadGroup();
  // Adds the packer's new drop counts to stats_.
  void SyncDropCounts();
  // The reordering operators before pack_flat, on group_samples_, in the spec's order.
  void ReorderGroupSamples();
  // Runs ensure_mixture on group_samples_ and counts what it dropped.
  void MixGroupSamples();
  // Hands one sample to the packer (and counts it in the mixture figures).
  void FeedSample(const SampleId& id);
  // Packs the whole group now and reorders its records (the shuffle of rows).
  void PackAndShuffleRows();
  // Fresh figures (Create, after replaying to `start`).
  void ResetStats();
  // Fills *record with the next full record; false at lane end.
  bool NextRecord(Record* record);

  const std::shared_ptr<const WorkSource> source_;
  const LaneOptions options_;
  const uint32_t lane_;

  uint64_t group_chunk_ = 0;
  bool group_loaded_ = false;
  bool ended_ = false;
  std::vector<SampleId> group_samples_;
  // Records mode: the global chunks each sample of the group came from, in load order
  // (a sample repeated in a group has one entry per occurrence; occurrences are
  // indistinguishable, so the reorder operators need not carry them).
  std::unordered_map<SampleId, std::deque<uint64_t>, SampleIdHash> group_chunks_;
  size_t sample_cursor_ = 0;
  bool group_flushed_ = false;
  std::unique_ptr<Packer> packer_;        // The current group's.
  PackCounts synced_;                     // packer_->counts() already in stats_.
  std::deque<PackedRecord> ready_;        // Packed, not yet returned.
  uint64_t records_in_group_ = 0;
  uint64_t next_batch_index_ = 0;
  std::shared_ptr<PackStats> stats_ = std::make_shared<PackStats>();
  std::shared_ptr<MixtureStats> mixture_stats_;  // Null without ensure_mixture.
};

// A record plan (plan.records) is MaterializeRecords's (record_batch.h). Otherwise:
// reads the tokens of `plan` from `datasets` (WorkSource::datasets()) into a Batch
// with the plan's metadata; positions count 0.. within each segment; padding
// segments are pad_token_id cells; valid_tokens is filled, and loss_mask when the plan
// has one (as MaterializeInto's).
// Errors: INTERNAL if a segment names a sample or token range the datasets do not
// have, or the segments do not fill rows * cols cells (a plan from another source);
// a shard's read error (object-store datasets: a failed download, an object changed
// since it was opened), with its code, prefixed with the lane, batch and sample.
absl::StatusOr<Batch> Materialize(const BatchPlan& plan,
                                  const std::vector<std::shared_ptr<const Dataset>>& datasets);

// The same, written straight into caller memory (e.g. a loaned ring slot), so the
// inline path makes no intermediate copy. `tokens` holds rows * cols int32; `positions`
// likewise, or is null when positions are not wanted. Same errors as Materialize.
// `valid_tokens` (null = not wanted) receives rows int32: each row's non-padding cells.
// `loss_mask` (null = not wanted) receives rows * cols bytes: a segment's cells are its
// sample's mask over [offset, offset + count) (Dataset::CopyLossMask: all ones for a
// dataset without one), padding cells are 0.
absl::Status MaterializeInto(const BatchPlan& plan,
                             const std::vector<std::shared_ptr<const Dataset>>& datasets,
                             int32_t* tokens, int32_t* positions,
                             int32_t* valid_tokens = nullptr, uint8_t* loss_mask = nullptr);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_BATCHING_LANE_STREAM_H_
