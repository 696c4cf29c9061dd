// Apportionment: how many draws of each mixture component the first n chunks hold.
//
// The interface the work source reads its mixture through: MixtureSchedule (fixed
// weights, mixture.h) and PhaseSchedule (weights as a function of the global chunk
// index, phase_schedule.h). Contract of every implementation: A_k(n) is a pure
// function of n (no history, so any chunk is reachable without replay), A_k(0) = 0,
// and A_k is monotone non-decreasing in n (chunk quotas are >= 0).
// Implementations are immutable and thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_ORDERING_APPORTIONMENT_H_
#define ZEPHON_DAEMON_PIPELINE_ORDERING_APPORTIONMENT_H_

#include <cstdint>
#include <optional>
#include <vector>

namespace zephon::pipeline {

class Apportionment {
 public:
  virtual ~Apportionment() = default;

  virtual size_t NumComponents() const = 0;
  // The nominal samples per chunk.
  virtual uint64_t chunk_size() const = 0;
  // A_k(n) for all k. REQUIRES: chunk_size * n fits in uint64.
  virtual void Cumulative(uint64_t n, std::vector<uint64_t>* out) const = 0;
  // The largest n with A_k(n) <= limit, or nullopt when A_k never exceeds it
  // (a component whose weight is 0 from some chunk on).
  virtual std::optional<uint64_t> LastChunk(size_t k, uint64_t limit) const = 0;

  // Draws of each component in chunk n: A_k(n + 1) - A_k(n).
  void ChunkQuotas(uint64_t n, std::vector<uint64_t>* out) const {
    std::vector<uint64_t> before;
    Cumulative(n, &before);
    Cumulative(n + 1, out);
    for (size_t k = 0; k < out->size(); ++k) (*out)[k] -= before[k];
  }
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_ORDERING_APPORTIONMENT_H_
