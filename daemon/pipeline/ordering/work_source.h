// WorkSource: the StaticMixtureWorkSource (or, with a schedule, the
// ScheduledMixtureWorkSource: weights a function of g, phase_schedule.h) — the
// curriculum cut into chunks of sample ids, with O(1)-ish random access to any global
// chunk g (no replay).
//
// Contract (determinism; see mixture.h and dataset_order.h for the pieces):
//   * Weights: spec.weights (or, when empty, each dataset's sample count) normalized
//     to integers summing to 2^32. weight_by TOKENS: spec.weights are token shares
//     and the sample weights are spec.weights[k] / tokens_per_sample[k], the estimates
//     of token_estimate.h (which says what "tokens" without weights means). Chunk g holds exactly chunk_size samples; dataset
//     k contributes quota_k(g) = A_k(g+1) - A_k(g) of them (MixtureSchedule).
//   * Dataset k's draws are numbered globally from 0: chunk g uses draws
//     [A_k(g), A_k(g+1)). Draw j -> sample by DatasetOrder with
//     dataset_seed = Combine(spec.seed, k).
//   * Inside a chunk the components are interleaved by smooth weighted round robin
//     over the quotas: every step each component with samples left adds its quota
//     to its score; the highest score (ties -> lower index) emits its next sample and
//     subtracts chunk_size. Scores start at 0 in every chunk.
//   * Length: each dataset's repetition (repetition.h: exhausted_policy,
//     stop_after_passes, max_repeats, each per dataset or the work source's
//     default) gives the stream's end, StreamEnd there. With one policy for all:
//     "stop_after_passes" (P, default 1): n_end = max_k of the largest n with
//     A_k(n) <= P * N_k (ends when the slowest dataset finished P passes; faster ones
//     continue into later passes meanwhile). "stop": n_end = min_k of the largest n
//     with A_k(n) <= N_k. "repeat": infinite, unless some dataset sets max_repeats
//     R_k: then n_end = min over those k of the largest n with A_k(n) <= (1 + R_k) *
//     N_k (the stream ends before the first chunk that would draw dataset k for a
//     (2 + R_k)-th pass). max_repeats with any other policy is INVALID_ARGUMENT.
//   * Passes: reshuffle_on_repeat (per dataset or the default, true) false replays
//     the first pass's order in every pass (DatasetOrder).
//   * Block shuffle: spec.shuffle_block_size is resolved per dataset by
//     ResolveBlockSizes (block_shuffle.h) and applied by DatasetOrder.
// Thread-safe (immutable apart from the mutex-protected pass caches).
#ifndef ZEPHON_DAEMON_PIPELINE_ORDERING_WORK_SOURCE_H_
#define ZEPHON_DAEMON_PIPELINE_ORDERING_WORK_SOURCE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/dataset.h"
#include "daemon/pipeline/ordering/dataset_order.h"
#include "daemon/pipeline/ordering/mixture.h"
#include "daemon/pipeline/ordering/phase_schedule.h"
#include "daemon/pipeline/ordering/repetition.h"
#include "daemon/pipeline/sample_id.h"
#include "proto/spec.pb.h"

namespace zephon::pipeline {

// Where a curriculum stands at one global chunk (WorkSource::CurriculumAt).
struct CurriculumPosition {
  uint64_t chunk = 0;              // the global chunk described
  size_t phase = 0;                // index of the schedule entry holding it
  size_t phases = 0;               // entries in the schedule
  uint64_t phase_start_chunk = 0;  // where that entry's phase begins
  bool linear = false;             // interpolate LINEAR (else STEP)
  std::vector<double> weights;     // per dataset at `chunk`, in work-source order
};

inline constexpr uint64_t kDefaultChunkSize = 1024;

class WorkSource {
 public:
  // REQUIRES: `spec` was resolved by ResolvePipeline (which fills the defaults and
  // validates names, weights, max_repeats and the policy once); `datasets[k]` is the
  // opened spec.datasets(k). INVALID_ARGUMENT for what needs the opened data: a
  // dataset count mismatch, a weight <= 0, a shuffle_block_size the datasets cannot
  // take, and a finite stream of 0 chunks (datasets too small for one chunk: the error
  // names each with its sample count and chunk_size). An unresolved spec (unset
  // exhausted_policy, chunk_size or stop_after_passes 0) is refused, not defaulted.
  static absl::StatusOr<std::unique_ptr<WorkSource>> Create(
      const proto::WorkSourceSpec& spec, std::vector<std::shared_ptr<const Dataset>> datasets);

  // Number of chunks; nullopt = infinite ("repeat").
  std::optional<uint64_t> NumChunks() const { return num_chunks_; }
  uint64_t chunk_size() const { return schedule_->chunk_size(); }
  const std::vector<std::shared_ptr<const Dataset>>& datasets() const { return datasets_; }
  // Replaces *out with the chunk_size sample ids of global chunk g.
  // REQUIRES: g < NumChunks() (when finite).
  void Chunk(uint64_t g, std::vector<SampleId>* out) const;
  // Each dataset's effective repetition (policy, passes, max_repeats, reshuffle).
  const std::vector<Repetition>& repetition() const { return repetition_; }
  // The draw of dataset `id.dataset`'s pass `pass` that is sample `id` (DatasetOrder::
  // DrawOf). REQUIRES: id names a sample of the datasets.
  uint64_t DrawOfSample(const SampleId& id, uint64_t pass) const {
    return orders_[id.dataset]->DrawOf(id.shard, id.index, pass);
  }
  // The global chunk holding draw j of dataset k (A_k(g) <= j < A_k(g + 1)), or nullopt
  // when no chunk does (the dataset's weight is 0 from some chunk on) or the stream ends
  // before it.
  std::optional<uint64_t> ChunkOfDraw(size_t k, uint64_t j) const;
  // Draws of each dataset in global chunks [0, n): A_k(n).
  void DrawsBefore(uint64_t n, std::vector<uint64_t>* out) const {
    schedule_->Cumulative(n, out);
  }
  // The curriculum of a scheduled mixture (ScheduledMixtureWorkSource); null for a
  // static one.
  const PhaseSchedule* phase_schedule() const { return phase_schedule_.get(); }
  // Resolved block-shuffle size of each dataset (0 = off).
  const std::vector<uint64_t>& block_sizes() const { return block_sizes_; }
  // weight_by TOKENS: each dataset's EstimateTokensPerSample; empty otherwise.
  const std::vector<double>& tokens_per_sample() const { return tokens_per_sample_; }
  // The target mixture of global chunk g's samples, one share per dataset summing to
  // 1, for ensure_mixture: the token shares asked for under weight_by TOKENS, else the
  // normalized sample weights. Static sources give every chunk the same weights; a
  // scheduled source supplies per-chunk ones here.
  std::vector<double> TargetWeights(uint64_t g) const;
  // A curriculum's phase and weights at global chunk g; nullopt without a schedule.
  std::optional<CurriculumPosition> CurriculumAt(uint64_t g) const;
  // Where the mixture stands at global chunk g (the furthest chunk a lane started):
  // each dataset's passes so far (draws / samples) and policy; for a curriculum also
  // "curriculum: phase i of P (from chunk s), weights ... at chunk g". One line each.
  std::string DescribeProgress(uint64_t g) const;
  // One-line description (datasets, weights, block sizes and max_repeats when set,
  // chunk size, policy, length; for weight_by TOKENS each dataset's token share,
  // tokens per sample and the sample weight they give).
  std::string Describe() const;

 private:
  WorkSource(std::vector<std::shared_ptr<const Dataset>> datasets,
             std::shared_ptr<const Apportionment> schedule, const proto::WorkSourceSpec& spec,
             std::vector<uint64_t> block_sizes, std::vector<Repetition> repetition);
  // INVALID_ARGUMENT for a finite work source of 0 chunks, naming each dataset too small
  // for its share of one chunk, its sample count and chunk_size.
  absl::Status NoChunkError() const;
  // Create's path for a spec with a schedule (a ScheduledMixtureWorkSource).
  static absl::StatusOr<std::unique_ptr<WorkSource>> CreateScheduled(
      const proto::WorkSourceSpec& spec, std::vector<std::shared_ptr<const Dataset>> datasets);
  // Sets num_chunks_ from the repetitions (StreamEnd); NoChunkError for 0 chunks.
  absl::Status SetLength();

  const std::vector<std::shared_ptr<const Dataset>> datasets_;
  const std::shared_ptr<const Apportionment> schedule_;
  std::vector<uint64_t> static_weights_;  // The static mixture's weights (for Describe).
  const std::vector<uint64_t> block_sizes_;
  const std::vector<Repetition> repetition_;
  std::vector<std::unique_ptr<DatasetOrder>> orders_;
  std::optional<uint64_t> num_chunks_;
  std::vector<double> tokens_per_sample_;  // Empty unless weight_by TOKENS.
  std::vector<double> token_shares_;       // The token weights asked for, summing to 1.
  proto::WorkSourceSpec::ExhaustedPolicy policy_ = proto::WorkSourceSpec::STOP_AFTER_PASSES;
  uint32_t default_passes_ = 1;       // The work source's stop_after_passes.
  std::string schedule_description_;  // " schedule=..." for a scheduled mixture; else "".
  std::shared_ptr<const PhaseSchedule> phase_schedule_;  // Null for a static mixture.
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_ORDERING_WORK_SOURCE_H_
