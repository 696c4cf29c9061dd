#include "daemon/resolve_attach.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "daemon/exec/worker_pool.h"
#include "daemon/pipeline/ordering/lanes.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/spec_string_form.h"
#include "shm/ring_layout.h"

namespace zephon::daemon {
namespace {

// Bounds of the execution knobs a client may ask for.
constexpr uint32_t kMaxPrefetchBatches = 1024;
constexpr double kMinDaemonTimeoutS = 0.5;  // >= 5 heartbeats of 0.1 s
constexpr double kMaxDaemonTimeoutS = 3600;

uint32_t RoundUpToPowerOfTwo(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// The spec's lane count, taken from the checkpoint when the spec leaves it unset.
absl::Status ApplyResumedLaneCount(const proto::CheckpointState& resume,
                                   proto::PipelineSpec* spec) {
  if (!spec->has_canonical_replicas()) {
    spec->set_canonical_replicas(resume.canonical_replicas());
    return absl::OkStatus();
  }
  if (spec->canonical_replicas() == resume.canonical_replicas()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "canonical_replicas=", spec->canonical_replicas(), " but the checkpoint was taken "
      "with canonical_replicas=", resume.canonical_replicas(),
      ": the number of lanes is fixed for the life of a run (leave it unset to take it "
      "from the checkpoint)"));
}

absl::StatusOr<std::vector<proto::LaneProgress>> LaneStarts(
    const proto::CheckpointState& resume, const std::vector<uint32_t>& lanes) {
  std::vector<proto::LaneProgress> starts;
  const auto& saved = resume.lanes();
  for (uint32_t lane : lanes) {
    if (lane >= static_cast<uint32_t>(saved.size()) || saved[lane].lane() != lane) {
      return absl::DataLossError(absl::StrCat(
          "the checkpoint has no progress for lane ", lane, " (it lists ", saved.size(),
          " lanes); it is damaged or from another run"));
    }
    starts.push_back(saved[lane]);
  }
  return starts;
}

}  // namespace

absl::StatusOr<ExecutionLimits> ValidateExecution(const proto::ExecutionOptions& execution) {
  if (execution.prefetch_batches() > kMaxPrefetchBatches) {
    return absl::InvalidArgumentError(absl::StrCat(
        "prefetch_batches=", execution.prefetch_batches(), " is too large: at most ",
        kMaxPrefetchBatches, " ring slots per instance"));
  }
  const double timeout_s = execution.daemon_timeout_s() == 0 ? 5 : execution.daemon_timeout_s();
  if (!(timeout_s >= kMinDaemonTimeoutS && timeout_s <= kMaxDaemonTimeoutS)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "daemon_timeout_s=", execution.daemon_timeout_s(), " is invalid: expected ",
        kMinDaemonTimeoutS, " to ", kMaxDaemonTimeoutS,
        " seconds (zephond heartbeats every 0.1 s)"));
  }
  if (execution.join_timeout_s() < 0 || !(execution.join_timeout_s() <= kMaxDaemonTimeoutS)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "join_timeout_s=", execution.join_timeout_s(), " is invalid: expected 0 to ",
        kMaxDaemonTimeoutS, " seconds"));
  }
  if (execution.num_threads() > exec::kMaxWorkerThreads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "num_threads=", execution.num_threads(), " is too large: at most ",
        exec::kMaxWorkerThreads, " (and zephond caps it at its --worker-threads)"));
  }
  ExecutionLimits limits;
  limits.producer_timeout_ms = static_cast<uint32_t>(timeout_s * 1000);
  if (execution.num_threads() > 0) limits.parallelism = execution.num_threads();
  return limits;
}

absl::StatusOr<ResolvedAttach> ResolveAttach(const proto::AttachRequest& request,
                                             const proto::CheckpointState* resume,
                                             const AttachDefaults& defaults) {
  if (request.ring_abi_major() != shm::kLayoutMajor) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this client speaks ring ABI major version ", request.ring_abi_major(),
        " but zephond speaks ", shm::kLayoutMajor,
        "; install the zephon client and zephond from the same release"));
  }
  ResolvedAttach out;
  ASSIGN_OR_RETURN(out.limits, ValidateExecution(request.execution()));
  proto::PipelineSpec spec = request.spec();
  // A client from before the options became enums sends them as strings (fields 5-7,
  // unknown now): read them as the enums, or its interleaved run would silently resolve
  // to the default mapping.
  if (absl::Status s = pipeline::UpgradeStringOptions(&spec); !s.ok()) {
    return absl::InvalidArgumentError(s.message());
  }
  if (resume != nullptr) RETURN_IF_ERROR(ApplyResumedLaneCount(*resume, &spec));

  ASSIGN_OR_RETURN(out.identity, ResolveIdentity(request.rank()));
  RankIdentity& identity = out.identity;
  // A checkpoint restored into another run_id (a restarted job given a new id, a forked
  // run) continues that run's stream under the new id; the registry records the old id
  // and round in the new run's lineage (CheckpointState.lineage).
  if (identity.local_peers > defaults.reader_capacity) {
    if (request.rank().local_peers() > 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "local_peers=", request.rank().local_peers(), " exceeds this zephond's ",
          defaults.reader_capacity, " readers per instance"));
    }
    identity.local_peers = defaults.reader_capacity;
  }

  ASSIGN_OR_RETURN(out.pipeline, pipeline::ResolvePipeline(std::move(spec), identity.dp_degree));
  // Validated in range by ResolvePipeline (CheckCanonicalReplicas).
  identity.canonical_replicas = out.pipeline.lanes.num_lanes;
  ASSIGN_OR_RETURN(out.owned_lanes,
                   pipeline::OwnedLanes(identity.canonical_replicas, identity.dp_degree,
                                        identity.dp_group_id, out.pipeline.spec.mapping_strategy()));
  if (resume != nullptr) {
    ASSIGN_OR_RETURN(out.lane_starts, LaneStarts(*resume, out.owned_lanes));
  }
  if (identity.canonical_replicas % identity.dp_degree != 0) {
    identity.warnings.push_back(absl::StrCat(
        "canonical_replicas=", identity.canonical_replicas, " is not divisible by dp_degree=",
        identity.dp_degree, ": data-parallel groups own unequal numbers of lanes, which "
        "unbalances their load; use a dp_degree that divides canonical_replicas"));
  }

  out.schema = BatchSchema::Of(out.pipeline.lanes);
  const uint32_t prefetch = request.execution().prefetch_batches() > 0
                                ? request.execution().prefetch_batches()
                                : defaults.default_prefetch_batches;
  out.geometry.slot_count = RoundUpToPowerOfTwo(std::max<uint32_t>(2, prefetch));
  out.geometry.slot_payload_bytes = out.schema.SlotPayloadBytes();
  out.geometry.reader_capacity = defaults.reader_capacity;
  return out;
}

}  // namespace zephon::daemon
