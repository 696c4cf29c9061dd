// One PipelineInstance per local data identity: it runs the DP group's deterministic
// stream and publishes every batch into one shared-memory ring that all of the group's
// ranks on this node read (fan-out). The work is done once per node, not once per rank.
//
// Readers: the instance is created with `local_peers` reader reservations at ring
// sequence 0, so a peer that attaches after the first batches were consumed still sees
// the stream from its start; reservations lapse after the join timeout. A reader that
// attaches when sequence 0 is already gone is refused with FAILED_PRECONDITION (the
// registry then starts a fresh instance for it: regeneration).
//
// Execution: the producer thread plans the group's batches in order and materializes
// them on the daemon's shared WorkerPool through an ordered, bounded stage
// (exec::ParallelBatches): at most `materialize.parallelism` batches are read at once
// and at most `queue_capacity` are planned ahead of the ring; the ring receives them in
// stream order, so its bytes never depend on thread counts or timing.
//
// Thread-safety: thread-safe. One producer thread per instance; control calls (attach,
// detach, status, tick) come from gRPC threads and the registry's timer.
#ifndef ZEPHON_DAEMON_PIPELINE_INSTANCE_H_
#define ZEPHON_DAEMON_PIPELINE_INSTANCE_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "daemon/audit/audit_log.h"
#include "daemon/audit/step_anchors.h"
#include "daemon/checkpoint/local_rounds.h"
#include "daemon/exec/ordered_stage.h"
#include "daemon/exec/parallel_batches.h"
#include "daemon/exec/worker_pool.h"
#include "daemon/batch_slot.h"
#include "daemon/identity.h"
#include "daemon/metrics/counters.h"
#include "daemon/progress_log.h"
#include "daemon/pipeline/batching/loss_mask_figures.h"
#include "daemon/pipeline/batching/group_stream.h"
#include "proto/zephon.pb.h"
#include "shm/ring_writer.h"

namespace zephon::daemon {

struct InstanceConfig {
  std::string instance_id;
  std::string spec_hash;
  proto::PipelineSpec spec;  // resolved
  // The datasets the stream reads (shared, immutable): a rank joining this instance with
  // the identical spec reuses them instead of opening its own.
  std::vector<std::shared_ptr<const pipeline::Dataset>> datasets;
  RankIdentity identity;     // of the first rank; data identity is shared by all readers
  std::vector<uint32_t> owned_lanes;
  // The tensors of every batch; geometry.slot_payload_bytes is its SlotPayloadBytes.
  BatchSchema schema;
  // Name of the ring's memfds ("<prefix>.<pid>.<serial>"), for /proc/<pid>/fd and logs.
  std::string shm_name;
  shm::RingGeometry geometry;
  absl::Duration join_timeout = absl::Seconds(30);
  // Reader slots held at the stream's start for local peers still to attach.
  uint32_t reserved_readers = 1;
  // run_id, or "local-N" for an unnamed single-rank run: what checkpoint rounds group by.
  std::string run_key;
  // Identity of the restored checkpoint (hash of its bytes); empty for a fresh run.
  std::string restore_key;
  // The round a rank's next checkpoint() is (restored round + 1, or 0).
  uint64_t next_round = 0;
  // A curriculum's schedule revisions (CheckpointState.schedule_history), carried into
  // this instance's checkpoints.
  std::vector<proto::ScheduleRevision> schedule_history;
  // The runs this one continues (CheckpointState.lineage), carried into its checkpoints.
  std::vector<proto::RunLineage> lineage;
  std::string explain_stream;  // the engine's own description
  // Where the instance appends an audit record per batch it publishes
  // (daemon/audit/audit_log.h); empty = no audit.
  std::string audit_dir;
  // Where the instance leaves step anchors for `zephonctl which`
  // (daemon/audit/step_anchors.h): the node's cache and, for a named run with a local
  // aggregate_dir, the run's directory there; with the lane options they are counted
  // in. Empty = none (a resume whose positions are not this spec's from its start).
  std::vector<std::string> anchor_dirs;
  uint64_t flush_every_k_chunks = 1;
  uint64_t microbatch_size = 1;
  // Requested materialize parallelism and reorder window (capped by the pool).
  exec::OrderedStageOptions materialize;
  // The ring's memfds come from it (RingWriter::Create); its clock dates the creation
  // the join timeout counts from. Must outlive the instance.
  Env* env = Env::Default();
};

class PipelineInstance final : public checkpoint::ProgressSource {
 public:
  // `pool` is the daemon's shared worker pool; null materializes inline on the
  // producer thread. `counters` (null: private ones) counts ring and pipeline errors.
  // Errors: those of RingWriter::Create and OrderedStage::Create.
  static absl::StatusOr<std::unique_ptr<PipelineInstance>> Create(
      InstanceConfig config, std::unique_ptr<pipeline::GroupStream> stream,
      std::shared_ptr<exec::WorkerPool> pool = nullptr,
      std::shared_ptr<metrics::DaemonCounters> counters = nullptr);
  // Stops the producer (within one 100 ms poll) and closes the ring; its memory is freed
  // when the last reader unmaps it.
  // Materializations still in the pool finish on their own and are discarded.
  ~PipelineInstance();
  PipelineInstance(const PipelineInstance&) = delete;
  PipelineInstance& operator=(const PipelineInstance&) = delete;

  // Attaches one rank at the stream's start. Fills the ring fields of `reply`.
  // FAILED_PRECONDITION when the start of the stream was already overwritten.
  absl::Status AttachReader(uint32_t global_rank, int64_t pid, proto::AttachReply* reply)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Ends a reader. `died` (connection lost without a detach) poisons the ring: the
  // peers of a dead rank cannot keep identical batches, so they get a clear error.
  void DetachReader(uint32_t reader_index, bool died) ABSL_LOCKS_EXCLUDED(mu_);

  // Per-lane progress of the owned lanes after each reader took its first `n_taken`
  // batches from its iterator. FAILED_PRECONDITION when n_taken exceeds what was
  // produced or was already folded away.
  absl::StatusOr<std::vector<proto::LaneProgress>> ProgressAfter(
      uint64_t n_taken) const override;

  // True once the ring was poisoned (a reader died or the pipeline failed): the
  // instance can no longer serve new readers.
  bool poisoned() const;
  // Closes the ring: readers drain published batches, then get CANCELLED.
  void Close();
  // Global ranks of the readers attached now.
  std::vector<uint32_t> attached_ranks() const ABSL_LOCKS_EXCLUDED(mu_);
  // The client pid of the reader attached as `global_rank`, if one is.
  std::optional<int64_t> PidOfRank(uint32_t global_rank) const ABSL_LOCKS_EXCLUDED(mu_);
  // Number of readers attached now.
  int attached_readers() const ABSL_LOCKS_EXCLUDED(mu_);
  // Heartbeat for readers and expiry of reservations; called periodically.
  void Tick(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);

  const InstanceConfig& config() const { return config_; }
  // Explain's lines on the mixture's progress (WorkSource::DescribeProgress).
  void AppendMixtureLines(std::string* stages) const;
  // The furthest global chunk this instance's lanes have reached at what its readers
  // released (the first chunk of the furthest lane's flush group); nullopt when the
  // recorded progress cannot say.
  std::optional<uint64_t> FurthestChunk() const;
  proto::InstanceStatus Status() const ABSL_LOCKS_EXCLUDED(mu_);
  // Multi-line: identity, then the stages (work source, lanes, operators, materialize,
  // ring) and this instance's threads. First line "instance <id>".
  std::string Explain() const;
  uint64_t ring_bytes() const;
  // Descriptors for one reader process of the ring (data read-only, cursors).
  absl::StatusOr<shm::RingFds> ReaderFds() const { return writer_->ReaderFds(); }
  uint64_t ring_generation() const;
  // Effective materialize parallelism (1 = inline on the producer thread).
  uint32_t parallelism() const { return batches_->parallelism(); }

 private:
  PipelineInstance(InstanceConfig config, std::unique_ptr<exec::ParallelBatches> batches,
                   std::unique_ptr<shm::RingWriter> writer,
                   std::shared_ptr<metrics::DaemonCounters> counters);
  void ProduceLoop();
  // Appends the audit record of the batch about to be published (stops auditing, loudly, if
  // the log cannot be written). Producer thread only.
  void Audit(uint64_t seq, uint32_t lane, uint64_t lane_batch_index,
             const pipeline::LanePosition& start, uint32_t rows,
             const std::vector<pipeline::SampleId>& samples, std::string token_sha256);
  // Batches every attached reader released (min released cursor); `published` when
  // no reader is attached.
  uint64_t Released() const;
  // "run=... instance=... ring=... gen=...": the context every warning and error names.
  std::string Where() const;

  // Constant after construction.
  const InstanceConfig config_;
  const absl::Time created_;
  const std::shared_ptr<metrics::DaemonCounters> counters_;  // thread-safe itself
  std::unique_ptr<shm::RingWriter> writer_;  // thread-safe itself
  // Which lane position each published batch ends at (thread-safe itself).
  std::unique_ptr<ProgressLog> progress_;

  // Only the producer thread calls Next(); Cancel/Explain/stats are thread-safe.
  const std::unique_ptr<exec::ParallelBatches> batches_;

  mutable absl::Mutex mu_;
  std::vector<uint32_t> reserved_ ABSL_GUARDED_BY(mu_);  // reader slots held for peers
  std::vector<uint32_t> attached_ ABSL_GUARDED_BY(mu_);
  std::vector<uint32_t> ranks_ ABSL_GUARDED_BY(mu_);     // global rank per attached_
  std::vector<int64_t> pids_ ABSL_GUARDED_BY(mu_);       // client pid per attached_
  // (tick time, Released()) over the last ~10 s, for released_per_s in Status.
  std::deque<std::pair<absl::Time, uint64_t>> released_samples_ ABSL_GUARDED_BY(mu_);

  // SFT: the masked share of each lane's written tokens (loss_mask pipelines only).
  pipeline::LossMaskTally loss_masks_;  // thread-safe itself

  // Written by the producer thread, read by status.
  std::atomic<uint64_t> produced_{0};
  // Null without an audit (or after it failed); written by the producer thread only.
  std::unique_ptr<audit::AuditLog> audit_;
  // One per anchor_dirs entry; one that failed is dropped. Producer thread only.
  std::vector<std::unique_ptr<audit::StepAnchorWriter>> anchors_;
  std::atomic<bool> stop_{false};
  std::thread producer_;
};

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_PIPELINE_INSTANCE_H_
