// ResolveAttach: the one step that turns an attach request into every value the daemon
// acts on. Each option is defaulted and validated here once, and nowhere after:
//   * the ring ABI major version (FAILED_PRECONDITION on a mismatch);
//   * execution knobs (ValidateExecution): prefetch, timeouts, threads;
//   * the rank (ResolveIdentity, identity.h) and local_peers against the daemon's
//     readers per instance;
//   * canonical_replicas: the spec's value, else the resumed checkpoint's, else
//     dp_degree (pipeline::ResolvePipeline); a resume with another value, or with
//     another run_id, is FAILED_PRECONDITION;
//   * the spec (pipeline::ResolvePipeline, spec.h) and, from it, the lane options,
//     this group's owned lanes, the batch schema and the ring geometry sized from it;
//   * where each owned lane starts when resuming (DATA_LOSS if the checkpoint lacks it).
// Errors name the option, the values and the fix. Opening datasets and the spec hash
// are not part of it (they do I/O). Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_RESOLVE_ATTACH_H_
#define ZEPHON_DAEMON_RESOLVE_ATTACH_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/batch_slot.h"
#include "daemon/exec/ordered_stage.h"
#include "daemon/identity.h"
#include "daemon/pipeline/spec.h"
#include "proto/checkpoint.pb.h"
#include "proto/zephon.pb.h"
#include "shm/ring_writer.h"

namespace zephon::daemon {

// Validated execution knobs of one attach.
struct ExecutionLimits {
  uint32_t producer_timeout_ms = 5000;
  // Requested materialize parallelism (num_threads, 0 -> exec::kDefaultParallelism);
  // the instance caps it at the worker pool's size.
  uint32_t parallelism = exec::kDefaultParallelism;
};

// Checks the execution knobs (bounded ring size, threads and timeouts; NaN refused).
absl::StatusOr<ExecutionLimits> ValidateExecution(const proto::ExecutionOptions& execution);

// What the daemon contributes to the resolution (its flags).
struct AttachDefaults {
  uint32_t reader_capacity = 32;         // readers per ring
  uint32_t default_prefetch_batches = 8;  // ring slots when prefetch_batches is 0
};

struct ResolvedAttach {
  RankIdentity identity;  // canonical_replicas set; warnings to hand back
  // The spec with every default filled (what the spec hash covers) and its lane options.
  pipeline::ResolvedPipeline pipeline;
  std::vector<uint32_t> owned_lanes;  // ascending
  // Where each owned lane starts (same order), from the checkpoint; empty when fresh.
  std::vector<proto::LaneProgress> lane_starts;
  BatchSchema schema;
  shm::RingGeometry geometry;  // slot payload = schema.SlotPayloadBytes()
  ExecutionLimits limits;
};

// `resume` is the decoded checkpoint the rank restores, or null for a fresh start.
absl::StatusOr<ResolvedAttach> ResolveAttach(const proto::AttachRequest& request,
                                             const proto::CheckpointState* resume,
                                             const AttachDefaults& defaults);

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_RESOLVE_ATTACH_H_
