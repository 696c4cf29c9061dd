// Packers: pack_flat's algorithms, deciding which pieces of which samples fill each
// record of max_length cells. They see only sample ids and lengths (never tokens), one
// lane's flush group at a time: the lane adds the group's samples in order, then
// flushes, and creates a fresh packer for the next group, so all packing state lives
// in one group and a restore replays at most that group's lengths.
//
// Algorithms (the upstream names and semantics):
//   wrap          A FIFO token stream cut into records of exactly max_length; samples
//                 are split across records; Flush drops the tail that does not fill a
//                 record (counted in dropped_tokens). Never pads.
//   first_fit     At most num_bins open bins. A sample goes into the first open bin (in
//   best_fit      opening order) with room for it (first_fit), or into the one that
//                 is left with the least room (best_fit, the earliest among equals);
//                 with none, a new bin is opened, emitting the oldest open bin first
//                 when num_bins are open. A bin is emitted as soon as it is full.
//                 Samples are never split, except one longer than max_length when
//                 drop_oversized is false: its max_length pieces are emitted as full
//                 records and its remainder is packed like a sample (split_samples);
//                 with drop_oversized it is dropped (dropped_samples, dropped_tokens).
//                 Flush emits every open bin in opening order.
//   best_fit_wrap A lookahead pool of candidate_pool_size samples (exceeded while the
//                 pool holds fewer than max_length tokens). Once the pool is over its
//                 size and holds a record's worth, a record is filled: first samples
//                 pooled for more than max_candidate_age later arrivals (oldest
//                 first), then repeatedly the largest sample that fits whole (the
//                 earliest among equals), then, if room is left, the first tokens of
//                 the largest pooled sample (one cut per record; its rest stays
//                 pooled). So every record before Flush is full; Flush packs the pool
//                 the same way and pads the last record.
// Knobs (all off by default, leaving the above unchanged):
//   min_sequence_length   first_fit/best_fit: a bin whose room falls below it after a
//                         placement is emitted at once.
//   flush_strategy        first_fit/best_fit: the bin emitted at the num_bins limit is
//                         the oldest ("fifo") or the most filled ("fullest", the oldest
//                         among equals).
//   max_sequences_per_bin first_fit/best_fit/best_fit_wrap: a record holds at most this
//                         many segments; a bin reaching it is emitted, and best_fit_wrap
//                         closes the record it fills (padding the rest).
// Every emitted record is max_length cells: the samples' pieces, then one padding
// segment when the algorithm pads and the record is short. Empty samples are ignored.
// Deterministic: the records are a function of the options and the added sequence.
// Single-owner (not thread-safe).
#ifndef ZEPHON_DAEMON_PIPELINE_BATCHING_PACKERS_H_
#define ZEPHON_DAEMON_PIPELINE_BATCHING_PACKERS_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/pipeline/batching/batch.h"

namespace zephon::pipeline {

enum class PackAlgorithm { kWrap, kFirstFit, kBestFit, kBestFitWrap };

// "wrap", "first_fit", "best_fit", "best_fit_wrap" (empty = "wrap"); INVALID_ARGUMENT
// listing the names otherwise.
absl::StatusOr<PackAlgorithm> ParsePackAlgorithm(absl::string_view name);
const char* PackAlgorithmName(PackAlgorithm algorithm);

// flush_strategy: "" or "fifo" -> false, "fullest" -> true; INVALID_ARGUMENT otherwise.
absl::StatusOr<bool> ParseFlushFullest(absl::string_view name);

// Limits on the per-lane state (bounded memory whatever the spec says).
inline constexpr uint32_t kMaxNumBins = 4096;
inline constexpr uint64_t kMaxCandidatePoolSize = uint64_t{1} << 20;
inline constexpr uint64_t kDefaultCandidatePoolSize = 1024;
inline constexpr uint64_t kCandidateAgeFactor = 8;  // default max_candidate_age / pool

struct PackOptions {
  PackAlgorithm algorithm = PackAlgorithm::kWrap;
  uint64_t max_length = 0;
  uint32_t num_bins = 0;                 // first_fit, best_fit
  bool drop_oversized = true;            // first_fit, best_fit
  uint64_t candidate_pool_size = 0;      // best_fit_wrap
  uint64_t max_candidate_age = 0;        // best_fit_wrap
  int32_t pad_token_id = 0;              // every algorithm but wrap
  uint64_t min_sequence_length = 0;      // first_fit, best_fit; 0 = off
  bool flush_fullest = false;            // first_fit, best_fit; false = "fifo"
  uint32_t max_sequences_per_bin = 0;    // all but wrap; 0 = no cap

  bool pads() const { return algorithm != PackAlgorithm::kWrap; }
};

// Counts of what did not reach a record whole, since the packer was created.
struct PackCounts {
  uint64_t dropped_tokens = 0;   // wrap's flush tails; oversized samples dropped
  uint64_t dropped_samples = 0;  // oversized samples dropped (first_fit, best_fit)
  uint64_t split_samples = 0;    // samples placed in more than one record (not wrap)
};

// One record: pieces of samples in row order, then at most one padding segment; the
// counts sum to max_length.
struct PackedRecord {
  std::vector<Segment> segments;
};

class Packer {
 public:
  // REQUIRES: options validated (LaneOptions::FromSpec): max_length >= 2, and the
  // algorithm's own fields in range (num_bins >= 1, pool size and age >= 1).
  static std::unique_ptr<Packer> Create(const PackOptions& options);
  virtual ~Packer() = default;

  // Adds tokens [0, length) of sample `id`; appends the records it completes to *out.
  virtual void Add(const SampleId& id, uint64_t length, std::deque<PackedRecord>* out) = 0;
  // The group's end: appends every record still open (padded) to *out and drops what
  // cannot be emitted (wrap's tail). The packer is empty afterwards.
  virtual void Flush(std::deque<PackedRecord>* out) = 0;

  const PackCounts& counts() const { return counts_; }

 protected:
  explicit Packer(const PackOptions& options) : options_(options) {}
  // Appends the record `segments` (filling `used` cells), padded to max_length.
  void Emit(std::vector<Segment> segments, uint64_t used, std::deque<PackedRecord>* out) const;

  const PackOptions options_;
  PackCounts counts_;
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_BATCHING_PACKERS_H_
