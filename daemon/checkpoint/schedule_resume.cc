#include "daemon/checkpoint/schedule_resume.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/pipeline/ordering/phase_schedule.h"

namespace zephon::checkpoint {
namespace {

// Number of entries of `s` that decide chunks < past_end.
size_t PastEntries(const pipeline::PhaseSchedule& s, uint64_t past_end) {
  size_t n = 0;
  while (n < s.phases().size() && s.phases()[n].start_chunk < past_end) ++n;
  // A linear ramp toward the next entry shapes the chunks before it.
  if (s.linear() && n > 0 && n < s.phases().size()) ++n;
  return n;
}

proto::ScheduleRevision Revision(const proto::WorkSourceSpec& ws, uint64_t from_chunk,
                                 uint64_t round) {
  proto::ScheduleRevision r;
  r.set_from_chunk(from_chunk);
  r.set_round(round);
  *r.mutable_schedule() = ws.schedule();
  r.set_interpolate(ws.interpolate());
  return r;
}

}  // namespace

uint64_t StartedChunksEnd(const proto::CheckpointState& state) {
  uint64_t furthest = 0;
  for (const auto& lane : state.lanes()) furthest = std::max(furthest, lane.flush_group_chunk());
  const uint64_t k = std::max<uint64_t>(1, state.spec().flush_every_k_chunks());
  return (furthest + k) * std::max<uint64_t>(1, state.canonical_replicas());
}

absl::StatusOr<bool> AcceptSchedule(
    const proto::CheckpointState& resume, const proto::PipelineSpec& spec,
    const std::string& spec_hash,
    const std::function<std::string(const proto::PipelineSpec&)>& hash_of,
    std::vector<proto::ScheduleRevision>* history) {
  history->assign(resume.schedule_history().begin(), resume.schedule_history().end());
  if (resume.spec_hash() == spec_hash) return true;
  const proto::WorkSourceSpec& old_ws = resume.spec().work_source();
  const proto::WorkSourceSpec& new_ws = spec.work_source();
  if (old_ws.schedule_size() == 0 || new_ws.schedule_size() == 0) return false;
  proto::PipelineSpec rescheduled = resume.spec();
  *rescheduled.mutable_work_source()->mutable_schedule() = new_ws.schedule();
  rescheduled.mutable_work_source()->set_interpolate(new_ws.interpolate());
  if (hash_of(rescheduled) != spec_hash) return false;  // Something else changed too.

  const uint64_t past_end = StartedChunksEnd(resume);
  auto old_s = pipeline::PhaseSchedule::Create(old_ws);
  auto new_s = pipeline::PhaseSchedule::Create(new_ws);
  if (!old_s.ok()) return old_s.status();
  if (!new_s.ok()) return new_s.status();
  const std::string why = absl::StrCat(
      ": the checkpoint had started global chunks below ", past_end,
      " (its furthest lane's flush group x canonical_replicas), so only schedule entries "
      "starting at chunk ", past_end, " or later may change");
  if (old_ws.interpolate() != new_ws.interpolate() && past_end > 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("work_source.interpolate changed on resume", why));
  }
  const size_t old_past = PastEntries(*old_s, past_end);
  const size_t new_past = PastEntries(*new_s, past_end);
  for (size_t i = 0; i < std::max(old_past, new_past); ++i) {
    const bool both = i < old_s->phases().size() && i < new_s->phases().size();
    if (both && old_s->phases()[i] == new_s->phases()[i]) continue;
    const auto& named = i < new_s->phases().size() ? new_s->phases()[i] : old_s->phases()[i];
    return absl::FailedPreconditionError(absl::StrCat(
        "work_source.schedule[", i, "] (starting at chunk ", named.start_chunk, ") ",
        i < new_s->phases().size() ? (i < old_s->phases().size() ? "differs from" : "is not in")
                                   : "was dropped from",
        " the checkpoint's schedule, which is in its past", why));
  }
  if (history->empty()) history->push_back(Revision(old_ws, 0, 0));
  history->push_back(Revision(new_ws, past_end, resume.round() + 1));
  return true;
}

}  // namespace zephon::checkpoint
