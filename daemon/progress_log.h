// ProgressLog: what one PipelineInstance's group has *taken*, as per-lane progress.
//
// A checkpoint records batches taken, never prefetched ones (docs/design.md, Checkpoint
// contract), but the producer runs ahead of the readers by up to the ring's slots plus
// the open loans. So the producer Records every batch it publishes (seq 0, 1, ... in
// stream order, with the lane, lane_batch_index and the lane's position after the
// batch, pipeline::BatchPlan::end), and at checkpoint time ProgressAfter(n_taken)
// answers each owned lane's proto::LaneProgress after the group's first `n_taken`
// batches: {lane, next_batch_index, flush_group_chunk, records_into_group}. Merged over
// all groups these are the topology-free CheckpointState.lanes that
// pipeline::GroupStream::Create(..., restore) resumes from on any dp_degree.
//
// seq counts this instance's batches from its start (a restored instance starts again
// at 0, from the restored progress), matching RankProgress.taken.
//
// Memory: one small entry per recorded batch above the folded base. The daemon calls
// FoldBelow(min over the ring's readers of their released cursor) as readers release
// slots; a checkpoint can never ask about fewer batches than every reader has
// released, so memory stays bounded by (ring slots + open loans).
//
// Thread-safe: Record (producer thread), ProgressAfter (checkpoint path) and FoldBelow
// (the daemon's release path) may run concurrently.
#ifndef ZEPHON_DAEMON_PROGRESS_LOG_H_
#define ZEPHON_DAEMON_PROGRESS_LOG_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pipeline/batching/batch.h"
#include "proto/checkpoint.pb.h"

namespace zephon::daemon {

class ProgressLog {
 public:
  // `start`: every owned lane's progress before the instance's first batch, strictly
  // ascending by lane: all zeros ({lane, 0, 0, 0}) on a fresh start, the checkpoint's
  // entries on a restore; pipeline::GroupStream::Progress() right after Create is
  // exactly this.
  // REQUIRES: `start` non-empty with strictly ascending lanes (true of
  // GroupStream::Progress()); use Create for input not validated yet.
  explicit ProgressLog(std::vector<proto::LaneProgress> start);
  // The same, validated: INVALID_ARGUMENT if `start` is empty or its lanes are not
  // strictly ascending.
  static absl::StatusOr<std::unique_ptr<ProgressLog>> Create(
      std::vector<proto::LaneProgress> start);
  ProgressLog(const ProgressLog&) = delete;
  ProgressLog& operator=(const ProgressLog&) = delete;

  // Records that batch `seq` of the stream is lane `lane`'s batch `lane_batch_index`,
  // after which the lane stands at `end`. REQUIRES: called in stream order, once per
  // published batch, before any reader can take that batch.
  // Errors (nothing recorded; the producer should poison the instance):
  //   FAILED_PRECONDITION if seq != recorded() (a gap or a repeat), or if
  //   lane_batch_index is not the lane's next index; INVALID_ARGUMENT if `lane` is not
  //   owned.
  [[nodiscard]] absl::Status Record(uint64_t seq, uint32_t lane, uint64_t lane_batch_index,
                                    pipeline::LanePosition end) ABSL_LOCKS_EXCLUDED(mu_);

  // Each owned lane's progress (ascending lanes) after each reader of the group took
  // its first `n_taken` batches. Errors: FAILED_PRECONDITION naming n_taken and the
  // bounds if n_taken > recorded() (those batches were never produced) or
  // n_taken < base() (already folded away).
  absl::StatusOr<std::vector<proto::LaneProgress>> ProgressAfter(uint64_t n_taken) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Forgets the entries of batches < seq (their effect stays in the base), so
  // ProgressAfter(n) keeps working for n >= seq only. Called by the daemon with the
  // minimum released cursor over the ring's readers. No-op if seq <= base().
  // Errors: FAILED_PRECONDITION if seq > recorded().
  [[nodiscard]] absl::Status FoldBelow(uint64_t seq) ABSL_LOCKS_EXCLUDED(mu_);

  // Batches recorded so far (== the next seq).
  uint64_t recorded() const ABSL_LOCKS_EXCLUDED(mu_);
  // The smallest n ProgressAfter still answers.
  uint64_t base() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    size_t lane_index;  // Into lanes_.
    uint64_t lane_batch_index;
    pipeline::LanePosition end;
  };

  // Index of `lane` in lanes_, or lanes_.size() if not owned.
  size_t LaneIndex(uint32_t lane) const;
  static void Apply(const Entry& e, std::vector<proto::LaneProgress>* progress);

  const std::vector<uint32_t> lanes_;  // Owned lanes, ascending.

  mutable absl::Mutex mu_;
  std::vector<proto::LaneProgress> base_ ABSL_GUARDED_BY(mu_);  // After base_seq_ batches.
  uint64_t base_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<Entry> entries_ ABSL_GUARDED_BY(mu_);  // Batches base_seq_, base_seq_ + 1, ...
  std::vector<uint64_t> next_index_ ABSL_GUARDED_BY(mu_);  // Per lane, after all entries.
};

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_PROGRESS_LOG_H_
