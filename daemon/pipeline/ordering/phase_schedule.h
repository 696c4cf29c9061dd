// PhaseSchedule: a data curriculum's mixture, weights as a pure function of the global
// chunk index g (ScheduledMixtureWorkSource; proto WorkSourceSpec.schedule).
//
// Entries. Entry i starts at global chunk s_i: its start_chunk, or
// ceil(start_sample / chunk_size) for a start given in samples (the first chunk whose
// nominal first sample g * chunk_size is >= start_sample, so a phase begins at most
// chunk_size - 1 samples late, never early). s_0 = 0 and s_i strictly increase. Its
// weights w^i are normalized to integers summing to 2^32 as NormalizeWeights does, a
// weight 0 staying 0 (that dataset draws nothing there).
//
// Weight of chunk g (W_k(g), summing to 2^32 for every g), i = last entry with s_i <= g:
//   STEP, or g in the last entry's phase: W_k(g) = w^i_k.
//   LINEAR: W_k(g) = (w^i_k (L - t) + w^{i+1}_k t) / L, L = s_{i+1} - s_i, t = g - s_i
//           (exact rationals; L is at most kMaxLinearPhaseChunks).
//
// Cumulative draws (Apportionment): A_k(n) = floor(chunk_size * sum_{g<n} W_k(g) / 2^32),
// computed in closed form per phase (arithmetic series), so O(phases) for any n: no
// history, and restore is O(phases). Monotone (W >= 0); dataset k's quota in chunk g is
// A_k(g+1) - A_k(g). Since the exact shares sum to chunk_size * n, the floors sum to
// chunk_size * n - r(n) with 0 <= r(n) < K (K datasets): a scheduled chunk holds
// chunk_size samples give or take K - 1, and chunk g begins within K - 1 samples of
// g * chunk_size. (The static mixture keeps exactly chunk_size per chunk, mixture.h;
// the floors are what makes the cumulative count a closed form when weights change.)
// Achieved shares: |A_k(n) - exact share| < 1 for every n.
// Thread-safe (immutable).
#ifndef ZEPHON_DAEMON_PIPELINE_ORDERING_PHASE_SCHEDULE_H_
#define ZEPHON_DAEMON_PIPELINE_ORDERING_PHASE_SCHEDULE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/ordering/apportionment.h"
#include "proto/spec.pb.h"

namespace zephon::pipeline {

// Longest linear ramp (keeps the exact arithmetic inside 128 bits).
inline constexpr uint64_t kMaxLinearPhaseChunks = uint64_t{1} << 30;

struct SchedulePhase {
  uint64_t start_chunk = 0;
  std::vector<uint64_t> weights;  // Sum 2^32; zeros allowed.
  bool operator==(const SchedulePhase& o) const {
    return start_chunk == o.start_chunk && weights == o.weights;
  }
};

class PhaseSchedule : public Apportionment {
 public:
  // INVALID_ARGUMENT naming the entry (work_source.schedule[i]) and the fix: no entry,
  // a weight count other than the datasets', a negative or non-finite weight, an entry
  // with no positive weight, a first start other than 0, starts not strictly
  // increasing in chunks, a start whose chunk * chunk_size overflows, a linear ramp
  // over kMaxLinearPhaseChunks; and `weights` or weight_by TOKENS set beside a
  // schedule. REQUIRES: chunk_size resolved (>= 1).
  static absl::StatusOr<PhaseSchedule> Create(const proto::WorkSourceSpec& spec);

  size_t NumComponents() const override { return num_components_; }
  uint64_t chunk_size() const override { return chunk_size_; }
  void Cumulative(uint64_t n, std::vector<uint64_t>* out) const override;
  std::optional<uint64_t> LastChunk(size_t k, uint64_t limit) const override;

  const std::vector<SchedulePhase>& phases() const { return phases_; }
  bool linear() const { return linear_; }
  // Index of the phase holding chunk g (last entry with start <= g).
  size_t PhaseOf(uint64_t g) const;
  // W_k(g) / 2^32 for every k: the weights in force at chunk g.
  std::vector<double> WeightsAt(uint64_t g) const;
  // " schedule=[0:(0.8,0.2), 100:(0.3,0.7)] step": for Describe.
  std::string Describe() const;

 private:
  PhaseSchedule(std::vector<SchedulePhase> phases, bool linear, uint64_t chunk_size,
                size_t num_components);

  // Not const, so that a StatusOr<PhaseSchedule> can be assigned; never changed.
  std::vector<SchedulePhase> phases_;
  bool linear_;
  uint64_t chunk_size_;
  size_t num_components_;
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_ORDERING_PHASE_SCHEDULE_H_
