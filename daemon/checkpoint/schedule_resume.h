// Restoring a curriculum (ScheduledMixtureWorkSource) whose schedule changed.
//
// A restore normally refuses any spec whose hash differs from the checkpoint's. A
// curriculum's FUTURE may change: the weights of chunks no lane had started when the
// checkpoint was taken were never used, so a new schedule for them keeps every
// delivered batch as it was. Rule:
//   * past_end = (max over lanes of flush_group_chunk + flush_every_k_chunks) x C, C =
//     canonical_replicas: a bound on every global chunk any lane had started (lane chunk
//     c maps into global chunks [c C, (c + 1) C) under both routings, and a lane's
//     position re-reads its whole flush group). Lanes progress at different rates; the
//     bound takes the furthest.
//   * The schedule's past is what decides the weights of chunks < past_end: the
//     entries starting before past_end, and under "linear" the entry after the last of
//     them (it sets the ramp's slope). These must be unchanged (same start chunk, same
//     normalized weights, same count), and interpolate too when past_end > 0;
//     otherwise FAILED_PRECONDITION names the first differing entry and past_end.
//   * Everything else in the spec must be as the checkpoint's: the checkpoint's spec
//     with the new schedule and interpolate must hash to the new spec's hash.
// An accepted change appends a revision to the schedule history (CheckpointState
// field 15: the original schedule from chunk 0, then each change with the chunk it
// took effect from and the round it resumed); an unchanged schedule keeps the history.
// Pure function; thread-safe.
#ifndef ZEPHON_DAEMON_CHECKPOINT_SCHEDULE_RESUME_H_
#define ZEPHON_DAEMON_CHECKPOINT_SCHEDULE_RESUME_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/checkpoint.pb.h"
#include "proto/spec.pb.h"

namespace zephon::checkpoint {

// The bound on started global chunks described above.
uint64_t StartedChunksEnd(const proto::CheckpointState& state);

// true with *history set when `spec` (resolved, hash `spec_hash`) may resume `resume`
// (equal hashes, or a change of the schedule's future only); false when the specs
// differ elsewhere (the caller's spec-hash refusal applies); FAILED_PRECONDITION when
// the schedule's past changed. `hash_of` hashes a resolved spec as SpecHash does with
// the opened datasets.
absl::StatusOr<bool> AcceptSchedule(
    const proto::CheckpointState& resume, const proto::PipelineSpec& spec,
    const std::string& spec_hash,
    const std::function<std::string(const proto::PipelineSpec&)>& hash_of,
    std::vector<proto::ScheduleRevision>* history);

}  // namespace zephon::checkpoint

#endif  // ZEPHON_DAEMON_CHECKPOINT_SCHEDULE_RESUME_H_
