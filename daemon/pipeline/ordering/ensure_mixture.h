// EnsureMixture: the `ensure_mixture(...)` operator. Reorders one flush group of one
// lane's samples (between the work source and pack_flat) so that the output tracks a
// target mixture of datasets, with a bounded buffer.
//
// Algorithm (determinism contract; integer arithmetic only, so every platform agrees):
//   * Target: one weight per dataset (>= 0, not all 0), the work source's weights for
//     the group's chunks (LaneStream takes WorkSource::TargetWeights). Shares
//     p_k = t_k / sum t become integers W_k = floor(p_k * 2^32). A dataset whose
//     target is 0 ("obsolete": a curriculum phased it out) still holding samples gets
//     W = floor(obsolete_drain_rate * 2^32 / #obsolete) and the others are scaled by
//     (1 - obsolete_drain_rate), so leftovers leave at that share of the output.
//   * Units: u(s) = 1 (weight_by samples) or the sample's length (tokens). e_k = units
//     of dataset k emitted in this group, E = sum e_k.
//   * Smooth weighted round robin in deficit form: the dataset "needed" next is the
//     argmax of score_k = W_k * (E + 1) - e_k * 2^32 over datasets with W_k > 0 that
//     are in the target or hold buffered samples (ties -> lower index).
//   * Per arriving sample (FIFO queue per dataset, arrival order kept within one):
//     enqueue; while the needed dataset has a sample buffered, emit it. Then, if
//     max_buffer_size > 0 and the buffer holds >= max_buffer_size samples, emit the
//     highest-scoring BUFFERED dataset's next sample until it holds
//     <= floor(drain_target_ratio * max_buffer_size).
//   * Group end: max_buffer_size > 0: emit everything buffered, highest-scoring
//     buffered dataset first. max_buffer_size == 0 (exact mode): emit while the
//     needed dataset is buffered, then drop the rest (counted).
//   So a scarce dataset can still drift (the output cannot hold what the group lacks);
//   a structural imbalance needs token weights in the work source instead.
// Pure function of its inputs; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_ORDERING_ENSURE_MIXTURE_H_
#define ZEPHON_DAEMON_PIPELINE_ORDERING_ENSURE_MIXTURE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/sample_id.h"
#include "proto/spec.pb.h"

namespace zephon::pipeline {

inline constexpr uint64_t kDefaultMixtureBufferSize = 1000;
inline constexpr double kDefaultDrainTargetRatio = 0.8;
inline constexpr double kDefaultObsoleteDrainRate = 0.1;
// max_buffer_size bound: the buffer holds SampleIds (16 bytes); 2^24 of them is 256 MiB
// per lane, more than any flush group worth reordering.
inline constexpr uint64_t kMaxMixtureBufferSize = uint64_t{1} << 24;

struct EnsureMixtureOptions {
  bool enabled = false;  // Whether the chain has the operator.
  uint64_t max_buffer_size = kDefaultMixtureBufferSize;  // 0 = exact mode.
  double drain_target_ratio = kDefaultDrainTargetRatio;
  double obsolete_drain_rate = kDefaultObsoleteDrainRate;
  bool weight_by_tokens = false;
  std::optional<double> warn_tolerance;

  std::string Describe() const;
};

// The resolved EnsureMixtureSpec, validated; INVALID_ARGUMENT naming
// "operators[index] ensure_mixture.<field>", the value and the allowed range.
absl::StatusOr<EnsureMixtureOptions> EnsureMixtureOptionsFromSpec(
    const proto::EnsureMixtureSpec& spec, int index);

// Fills the unset fields with their defaults (ResolvePipeline, before hashing).
void ResolveEnsureMixtureDefaults(proto::EnsureMixtureSpec* spec);

// What one call emitted and dropped, per dataset (sized to the target).
struct MixtureGroupCounts {
  std::vector<uint64_t> samples, tokens, dropped_samples, dropped_tokens;
  // Largest |achieved share - target share| over the datasets, in the units of
  // weight_by (0 for an empty output).
  double max_deviation = 0;
};

// Reorders *samples per the contract. `length(id)` is a sample's token count.
// REQUIRES: options.enabled; target.size() > every id.dataset; some target > 0.
void EnsureMixture(const EnsureMixtureOptions& options, const std::vector<double>& target,
                   const std::function<uint64_t(const SampleId&)>& length,
                   std::vector<SampleId>* samples, MixtureGroupCounts* counts);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_ORDERING_ENSURE_MIXTURE_H_
