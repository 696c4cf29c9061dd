// Repetition: what each dataset of a work source does when a pass over it ends.
//
// The work source's exhausted_policy, stop_after_passes and reshuffle_on_repeat are
// defaults; a DatasetSpec may override each (proto/spec.proto fields 12-14). The
// effective values of dataset k (upstream's per-dataset maps, guide §5.5):
//   * policy: d.exhausted_policy if set; else STOP_AFTER_PASSES when d sets
//     stop_after_passes; else the work source's exhausted_policy.
//   * passes (STOP_AFTER_PASSES only): d.stop_after_passes if set, else the work
//     source's stop_after_passes.
//   * max_repeats (REPEAT only): d.max_repeats; unset = unbounded (a filler dataset).
//   * reshuffle: d.reshuffle_on_repeat, else the work source's, else true.
// Refused (INVALID_ARGUMENT naming the dataset and the fix): max_repeats unless the
// dataset's policy is REPEAT; stop_after_passes set on a dataset whose policy is
// STOP or REPEAT, or together with max_repeats; stop_after_passes 0; an unknown policy.
//
// How the stream's length follows (StreamEnd): with n_k(limit) the number of chunks
// before dataset k's draws would exceed `limit`,
//   floor = max over STOP_AFTER_PASSES datasets of n_k(passes_k * N_k)
//           (the stream runs until the slowest of them finished its passes),
//   cap   = min over STOP datasets of n_k(N_k) and over bounded REPEAT datasets of
//           n_k((1 + max_repeats_k) * N_k) (it ends when the first of them runs out),
//   length = min(floor, cap), either term absent when its set is empty; infinite
//   when both are (only unbounded REPEAT datasets). A dataset that is never drawn
//   again (a curriculum weight falling to 0 for good) counts in neither term. With
//   one policy for every
//   dataset this is exactly the work source's former single-policy length.
// Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_ORDERING_REPETITION_H_
#define ZEPHON_DAEMON_PIPELINE_ORDERING_REPETITION_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/spec.pb.h"

namespace zephon::pipeline {

struct Repetition {
  proto::WorkSourceSpec::ExhaustedPolicy policy = proto::WorkSourceSpec::STOP_AFTER_PASSES;
  uint32_t passes = 1;                 // STOP_AFTER_PASSES: passes before the floor.
  std::optional<uint32_t> max_repeats;  // REPEAT: passes after the first; nullopt = no bound.
  bool reshuffle = true;

  // Passes the dataset may be drawn for before the stream must end, or nullopt when
  // it never ends the stream (unbounded REPEAT).
  std::optional<uint64_t> AllowedPasses() const;
  // AllowedPasses() x num_samples (saturating): the draws of the dataset the stream may
  // hold, or nullopt.
  std::optional<uint64_t> DrawLimit(uint64_t num_samples) const;
};

// The effective repetition of each dataset of `ws` (see above). REQUIRES: the work
// source's own exhausted_policy is resolved (not UNSPECIFIED).
absl::StatusOr<std::vector<Repetition>> ResolveRepetition(const proto::WorkSourceSpec& ws);

// The stream length in chunks (nullopt = infinite). `last_chunk(k, limit)` is the
// number of chunks before dataset k's cumulative draws exceed `limit`, or nullopt
// when they never do (its weight falls to 0 for good). `num_samples[k]` = N_k.
std::optional<uint64_t> StreamEnd(
    const std::vector<Repetition>& reps, const std::vector<uint64_t>& num_samples,
    const std::function<std::optional<uint64_t>(size_t, uint64_t)>& last_chunk);

// "repeat (max_repeats 2, replayed)" etc.: the dataset's policy for Describe/explain.
std::string DescribeRepetition(const Repetition& rep);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_ORDERING_REPETITION_H_
