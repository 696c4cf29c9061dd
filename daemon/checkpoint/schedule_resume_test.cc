#include "daemon/checkpoint/schedule_resume.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace zephon::checkpoint {
namespace {

void AddEntry(proto::WorkSourceSpec* ws, uint64_t start, std::vector<double> w) {
  auto* e = ws->add_schedule();
  e->set_start_chunk(start);
  for (double x : w) e->add_weights(x);
}

proto::PipelineSpec Spec(proto::WorkSourceSpec::Interpolate interpolate) {
  proto::PipelineSpec spec;
  spec.set_flush_every_k_chunks(2);
  auto* ws = spec.mutable_work_source();
  ws->add_datasets()->set_name("web");
  ws->add_datasets()->set_name("code");
  ws->set_chunk_size(16);
  ws->set_interpolate(interpolate);
  AddEntry(ws, 0, {9, 1});
  AddEntry(ws, 40, {2, 8});
  AddEntry(ws, 100, {1, 1});
  return spec;
}

// A stand-in for SpecHash: the deterministic serialization.
std::string Hash(const proto::PipelineSpec& spec) {
  std::string out;
  spec.SerializeToString(&out);
  return absl::StrCat(std::hash<std::string>()(out));
}

// C = 4 lanes; the furthest lane stands in flush group 6: chunks < (6 + 2) * 4 = 32 started.
proto::CheckpointState State(const proto::PipelineSpec& spec) {
  proto::CheckpointState state;
  state.set_canonical_replicas(4);
  state.set_round(3);
  *state.mutable_spec() = spec;
  state.set_spec_hash(Hash(spec));
  for (uint32_t l = 0; l < 4; ++l) {
    auto* lane = state.add_lanes();
    lane->set_lane(l);
    lane->set_flush_group_chunk(l == 2 ? 6 : 4);
  }
  return state;
}

TEST(ScheduleResumeTest, StartedChunksEndTakesTheFurthestLane) {
  EXPECT_EQ(StartedChunksEnd(State(Spec(proto::WorkSourceSpec::STEP))), 32u);
}

TEST(ScheduleResumeTest, AFutureChangeIsAcceptedAndRecorded) {
  const auto state = State(Spec(proto::WorkSourceSpec::STEP));
  std::vector<proto::ScheduleRevision> history;
  // Unchanged: accepted, no revision.
  auto ok = AcceptSchedule(state, state.spec(), state.spec_hash(), Hash, &history);
  ASSERT_TRUE(ok.ok() && *ok);
  EXPECT_TRUE(history.empty());
  // The second phase moved later and re-weighted; the third dropped: all in the future.
  proto::PipelineSpec changed = state.spec();
  changed.mutable_work_source()->clear_schedule();
  AddEntry(changed.mutable_work_source(), 0, {9, 1});
  AddEntry(changed.mutable_work_source(), 32, {3, 7});
  ok = AcceptSchedule(state, changed, Hash(changed), Hash, &history);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(*ok);
  ASSERT_EQ(history.size(), 2u);
  EXPECT_EQ(history[0].from_chunk(), 0u);
  EXPECT_EQ(history[0].schedule_size(), 3);
  EXPECT_EQ(history[1].from_chunk(), 32u);
  EXPECT_EQ(history[1].round(), 4u);
  EXPECT_EQ(history[1].schedule_size(), 2);
  // A later change appends to the recorded history.
  proto::CheckpointState again = State(changed);
  *again.mutable_schedule_history() = {history.begin(), history.end()};
  ok = AcceptSchedule(again, state.spec(), Hash(state.spec()), Hash, &history);
  ASSERT_TRUE(ok.ok() && *ok) << ok.status();
  EXPECT_EQ(history.size(), 3u);
}

TEST(ScheduleResumeTest, APastChangeIsRefusedNamingTheEntry) {
  const auto state = State(Spec(proto::WorkSourceSpec::STEP));
  std::vector<proto::ScheduleRevision> history;
  proto::PipelineSpec changed = state.spec();
  changed.mutable_work_source()->mutable_schedule(0)->set_weights(0, 5);
  auto ok = AcceptSchedule(state, changed, Hash(changed), Hash, &history);
  ASSERT_FALSE(ok.ok());
  EXPECT_EQ(ok.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(ok.status().message().find("work_source.schedule[0] (starting at chunk 0) differs"),
            std::string::npos)
      << ok.status();
  EXPECT_NE(ok.status().message().find("below 32"), std::string::npos);
  // An entry inserted before chunk 32 changes the past too.
  changed = state.spec();
  changed.mutable_work_source()->clear_schedule();
  AddEntry(changed.mutable_work_source(), 0, {9, 1});
  AddEntry(changed.mutable_work_source(), 20, {2, 8});
  ok = AcceptSchedule(state, changed, Hash(changed), Hash, &history);
  ASSERT_FALSE(ok.ok());
  EXPECT_NE(ok.status().message().find("work_source.schedule[1] (starting at chunk 20) differs"),
            std::string::npos)
      << ok.status();
}

TEST(ScheduleResumeTest, LinearRampTowardTheNextEntryIsPast) {
  const auto state = State(Spec(proto::WorkSourceSpec::LINEAR));
  std::vector<proto::ScheduleRevision> history;
  // Chunks 0..31 ramp from entry 0 toward entry 1 (at 40): entry 1 is past.
  proto::PipelineSpec changed = state.spec();
  changed.mutable_work_source()->mutable_schedule(1)->set_weights(1, 9);
  auto ok = AcceptSchedule(state, changed, Hash(changed), Hash, &history);
  ASSERT_FALSE(ok.ok());
  EXPECT_NE(ok.status().message().find("work_source.schedule[1]"), std::string::npos);
  // Entry 2 (at 100) is future.
  changed = state.spec();
  changed.mutable_work_source()->mutable_schedule(2)->set_weights(1, 9);
  ok = AcceptSchedule(state, changed, Hash(changed), Hash, &history);
  ASSERT_TRUE(ok.ok() && *ok) << ok.status();
  // interpolate itself is past once any chunk started.
  changed = state.spec();
  changed.mutable_work_source()->set_interpolate(proto::WorkSourceSpec::STEP);
  ok = AcceptSchedule(state, changed, Hash(changed), Hash, &history);
  ASSERT_FALSE(ok.ok());
  EXPECT_NE(ok.status().message().find("interpolate changed"), std::string::npos);
}

TEST(ScheduleResumeTest, AnotherChangeIsLeftToTheSpecHashRefusal) {
  const auto state = State(Spec(proto::WorkSourceSpec::STEP));
  std::vector<proto::ScheduleRevision> history;
  proto::PipelineSpec changed = state.spec();
  changed.mutable_work_source()->set_seed(99);
  changed.mutable_work_source()->mutable_schedule(2)->set_weights(1, 9);
  auto ok = AcceptSchedule(state, changed, Hash(changed), Hash, &history);
  ASSERT_TRUE(ok.ok());
  EXPECT_FALSE(*ok);
  // A static mixture has no schedule to change.
  proto::PipelineSpec plain = state.spec();
  plain.mutable_work_source()->clear_schedule();
  ok = AcceptSchedule(state, plain, Hash(plain), Hash, &history);
  ASSERT_TRUE(ok.ok());
  EXPECT_FALSE(*ok);
}

}  // namespace
}  // namespace zephon::checkpoint
