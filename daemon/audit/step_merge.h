// The leader's merge of a run's audit logs (audit_log.h) into one record per lane round
// at each completed checkpoint round: lane round j is lane batch j of every lane (a
// global step of B batches is B / C consecutive lane rounds), and its record is
//   u64 j (little-endian) | SHA-256 over lanes 0..C-1 of (token SHA-256 | sample ids,
//                          each as u64 little-endian)
//   | per lane 0..C-1: u64 flush_group_chunk, u64 records_into_group (where the lane's
//                      batch j started: an exact anchor for `zephonctl which`)
// appended to "<dir>/steps.zsteps" after a 28-byte header: "ZSTEPS02", u32 C and the
// run's spec hash (16 characters). The file is append-only with fixed entries of
// 40 + 16 C bytes, entry j at byte 28 + j * (40 + 16 C), so any lane round is one read
// (ReadMergedRound); a torn last entry is cut off when the file is next written or read. Records are added for lane rounds below the checkpoint's
// lowest lane position whose every lane batch the logs hold, in order, from where the
// file ends; a lane round the logs lack stops the merge (a later round continues it).
//
// StepMerger runs the merges on a thread of its own, so a checkpoint round never waits
// for one; merges of one directory run in order.
//
// Thread-safety: StepMerger is thread-safe. MergeSteps and ReadMergedSteps are not safe
// against concurrent calls on one directory (StepMerger serializes its own).
#ifndef ZEPHON_DAEMON_AUDIT_STEP_MERGE_H_
#define ZEPHON_DAEMON_AUDIT_STEP_MERGE_H_

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace zephon::audit {

inline constexpr char kStepsFile[] = "steps.zsteps";

// One merged lane round.
struct MergedRound {
  uint64_t lane_round = 0;
  std::string sha256;  // raw 32 bytes
  // Per lane, where its batch lane_round started: {flush_group_chunk, records_into_group}.
  std::vector<std::pair<uint64_t, uint64_t>> starts;
};

// Merges `dir`'s logs through lane round `through` (exclusive). Returns how many lane
// rounds the file holds afterwards. Errors: ReadAuditDir's and IndexRun's; the file's
// (a header of another C: FAILED_PRECONDITION).
absl::StatusOr<uint64_t> MergeSteps(const std::string& dir, uint64_t through);

// The merged records of `dir` (empty when there is no steps file).
absl::StatusOr<std::vector<MergedRound>> ReadMergedSteps(const std::string& dir,
                                                         uint32_t* canonical_replicas = nullptr);
// Lane round j's record, read with one pread (nullopt when the file does not hold it);
// `spec_hash` (may be null) receives the run's spec hash from the header.
// Errors: DATA_LOSS for a file that is not a steps file.
absl::StatusOr<std::optional<MergedRound>> ReadMergedRound(const std::string& dir, uint64_t j,
                                                           std::string* spec_hash = nullptr);

class StepMerger {
 public:
  // Starts the merging thread; throws std::system_error when none can be started.
  StepMerger();
  ~StepMerger();  // finishes the merge in progress, drops queued ones, joins
  StepMerger(const StepMerger&) = delete;
  StepMerger& operator=(const StepMerger&) = delete;

  // Queues a merge of `dir` through lane round `through`; returns at once. A directory
  // already queued only has its bound raised.
  void Enqueue(const std::string& dir, uint64_t through) ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until no merge is queued or running (tests).
  void Drain() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Run() ABSL_LOCKS_EXCLUDED(mu_);

  absl::Mutex mu_;
  std::deque<std::pair<std::string, uint64_t>> queue_ ABSL_GUARDED_BY(mu_);
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the members it reads exist
};

}  // namespace zephon::audit

#endif  // ZEPHON_DAEMON_AUDIT_STEP_MERGE_H_
