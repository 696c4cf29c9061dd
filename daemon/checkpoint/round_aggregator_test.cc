#include "daemon/checkpoint/round_aggregator.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "common/fake_env.h"
#include "common/file_io.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "daemon/checkpoint/aggregate_dir.h"
#include "daemon/checkpoint/round_testing.h"
#include "gtest/gtest.h"

namespace zephon::checkpoint {
namespace {

using testing::MakeReport;
using testing::MessageHas;
using testing::RunShape;
using testing::In;
using testing::Result;

std::string MakeTempDir() { return testing::MakeTempDir("agg"); }

// Submits each report from its own thread; results in report order.
std::vector<Result> SubmitAll(RoundAggregator* agg,
                              const std::vector<proto::CheckpointReport>& reports,
                              absl::Duration caller_timeout = absl::Seconds(30)) {
  std::vector<Result> results(reports.size(), absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (size_t i = 0; i < reports.size(); ++i) {
    threads.emplace_back([&, i] { results[i] = agg->Submit(reports[i], In(caller_timeout)); });
  }
  for (std::thread& t : threads) t.join();
  return results;
}

// Waits (bounded) until `agg` has `n` pending rounds.
void WaitPending(const RoundAggregator& agg, size_t n) {
  const absl::Time until = In(absl::Seconds(10));
  while (agg.pending_rounds() != n && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  ASSERT_EQ(agg.pending_rounds(), n);
}

// One round of `shape` where DP group 0 (node-a) took one batch more than the others:
// its lanes stand one batch ahead, so the checkpoint is mid-window.
std::vector<Result> MidWindowRound(RoundAggregator* agg, RunShape shape) {
  RunShape ahead = shape;
  ahead.taken = shape.taken + 1;
  return SubmitAll(agg, {MakeReport(ahead, "node-a", {0, 1}), MakeReport(shape, "node-b", {2, 3}),
                         MakeReport(shape, "node-c", {4, 5})});
}

TEST(RoundAggregatorTest, MidWindowCheckpointWarnsOncePerRun) {
  RoundAggregator agg;
  RunShape shape;
  for (uint64_t round : {0, 1}) {
    shape.round = round;
    const std::vector<Result> results = MidWindowRound(&agg, shape);
    for (const Result& r : results) {
      ASSERT_TRUE(r.ok()) << r.status();
      if (round == 0) {
        EXPECT_TRUE(MessageHas(absl::UnknownError(r->warning()), "mid-window"));
        EXPECT_TRUE(MessageHas(absl::UnknownError(r->warning()), "C=6"));
        EXPECT_TRUE(MessageHas(absl::UnknownError(r->warning()), "global batch 74"));
      } else {
        EXPECT_FALSE(r->has_warning()) << r->warning();  // once per run
      }
    }
  }
  shape.run_id = "run-2";  // another run is warned too
  shape.round = 0;
  EXPECT_TRUE(MidWindowRound(&agg, shape)[0]->has_warning());
}

TEST(RoundAggregatorTest, CheckpointAtAWholeNumberOfLaneRoundsDoesNotWarn) {
  RoundAggregator agg;
  RunShape shape;
  const std::vector<Result> results =
      SubmitAll(&agg, {MakeReport(shape, "node-a", {0, 1}), MakeReport(shape, "node-b", {2, 3}),
                       MakeReport(shape, "node-c", {4, 5})});
  for (const Result& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_FALSE(r->has_warning()) << r->warning();
  }
}

TEST(RoundAggregatorTest, EveryDaemonGetsIdenticalBytesAndTheFileIsWritten) {
  RunShape shape;
  shape.aggregate_dir = MakeTempDir();
  shape.round = 3;
  RoundAggregator agg;
  const std::vector<Result> results =
      SubmitAll(&agg, {MakeReport(shape, "node-a", {0, 1}), MakeReport(shape, "node-b", {2, 3}),
                       MakeReport(shape, "node-c", {4, 5})});
  const std::string path = CheckpointPath(shape.aggregate_dir, "run-1", 3);
  for (const Result& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->checkpoint(), results[0]->checkpoint());
    EXPECT_EQ(r->path(), path);
  }
  EXPECT_EQ(*ReadFile(path), results[0]->checkpoint());
  absl::StatusOr<proto::CheckpointState> state = DecodeCheckpoint(results[0]->checkpoint());
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->round(), 3u);
  EXPECT_EQ(state->ranks_size(), 6);
  EXPECT_EQ(state->lanes_size(), 6);
  EXPECT_EQ(agg.pending_rounds(), 0u);
}

TEST(RoundAggregatorTest, WithoutAggregateDirReturnsBytesAndNoPath) {
  RunShape shape;
  RoundAggregator agg;
  const std::vector<Result> results = SubmitAll(
      &agg, {MakeReport(shape, "node-a", {0, 2, 4}), MakeReport(shape, "node-b", {1, 3, 5})});
  for (const Result& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->path(), "");
    EXPECT_TRUE(DecodeCheckpoint(r->checkpoint()).ok());
  }
}

TEST(RoundAggregatorTest, MissingRanksTimeOutForEveryoneAndNoFileIsWritten) {
  RunShape shape;
  shape.aggregate_dir = MakeTempDir();
  shape.timeout_s = 0.3;
  RoundAggregator agg;
  const absl::Time start = absl::Now();
  const std::vector<Result> results =
      SubmitAll(&agg, {MakeReport(shape, "node-a", {0, 1}), MakeReport(shape, "node-b", {2, 3})});
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  for (const Result& r : results) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded);
    EXPECT_TRUE(MessageHas(r.status(),
                           "checkpoint round 0 of run run-1: timed out after 0.3 s waiting for "
                           "ranks [4-5] (did every rank call checkpoint() at the same step?)"));
    EXPECT_EQ(r.status(), results[0].status());
  }
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(shape.aggregate_dir, "run-1", 0)));
  // The straggler arriving after the failure gets the same failure, immediately.
  const Result late = agg.Submit(MakeReport(shape, "node-c", {4, 5}), In(absl::Seconds(30)));
  EXPECT_EQ(late.status(), results[0].status());
  EXPECT_FALSE(std::filesystem::exists(CheckpointPath(shape.aggregate_dir, "run-1", 0)));
}

TEST(RoundAggregatorTest, MismatchFailsTheWaitingSubmittersToo) {
  RunShape shape;
  RoundAggregator agg;
  Result first = absl::UnknownError("not run");
  std::thread waiter([&] {
    first = agg.Submit(MakeReport(shape, "node-a", {0, 1}), In(absl::Seconds(30)));
  });
  WaitPending(agg, 1);
  proto::CheckpointReport bad = MakeReport(shape, "node-b", {2, 3});
  bad.set_world_size(8);
  const Result second = agg.Submit(bad, In(absl::Seconds(30)));
  waiter.join();
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(first.status(), second.status());
  EXPECT_TRUE(MessageHas(first.status(), "world_size"));
}

TEST(RoundAggregatorTest, ACallerGivingUpFailsTheRoundForEveryone) {
  RunShape shape;
  RoundAggregator agg;
  Result patient = absl::UnknownError("not run");
  std::thread waiter([&] {
    patient = agg.Submit(MakeReport(shape, "node-a", {0, 1}), In(absl::Seconds(30)));
  });
  WaitPending(agg, 1);
  const Result hasty = agg.Submit(MakeReport(shape, "node-b", {2, 3}), In(absl::Milliseconds(100)));
  waiter.join();
  EXPECT_EQ(hasty.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(patient.status(), hasty.status());
  EXPECT_TRUE(MessageHas(patient.status(), "daemon node-b stopped waiting"));
  EXPECT_TRUE(MessageHas(patient.status(), "ranks [4-5]"));
}

TEST(RoundAggregatorTest, ACancelledCallerFailsTheRoundPromptly) {
  RunShape shape;
  RoundAggregator agg;
  Result patient = absl::UnknownError("not run");
  std::thread waiter([&] { patient = agg.Submit(MakeReport(shape, "node-a", {0, 1}), In(absl::Seconds(30))); });
  WaitPending(agg, 1);
  std::atomic<bool> cancelled{false};
  Result gone = absl::UnknownError("not run");
  std::thread leaver([&] {
    gone = agg.Submit(MakeReport(shape, "node-b", {2, 3}), In(absl::Seconds(30)),
                      [&] { return cancelled.load(); });
  });
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time cancel_at = absl::Now();
  cancelled = true;
  waiter.join();
  leaver.join();
  EXPECT_LT(absl::Now() - cancel_at, absl::Seconds(2));
  EXPECT_EQ(patient.status().code(), absl::StatusCode::kAborted);
  EXPECT_TRUE(MessageHas(patient.status(), "daemon node-b left the round"));
}

TEST(RoundAggregatorTest, RetriedAndLateReportsOfACompletedRoundGetTheSameBytes) {
  RunShape shape;
  RoundAggregator agg;
  const proto::CheckpointReport a = MakeReport(shape, "node-a", {0, 1, 2});
  const std::vector<Result> results = SubmitAll(&agg, {a, MakeReport(shape, "node-b", {3, 4, 5})});
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  const Result retry = agg.Submit(a, In(absl::Seconds(1)));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(retry->checkpoint(), results[0]->checkpoint());
  // A run restarted under the same run_id, from scratch, reaching the same round.
  RunShape restarted = shape;
  restarted.taken = 2;
  const Result stale = agg.Submit(MakeReport(restarted, "node-a", {0, 1, 2}), In(absl::Seconds(1)));
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(MessageHas(stale.status(), "restarted under the same run_id"));
}

TEST(RoundAggregatorTest, AForgottenRunStartsItsRoundsAfresh) {
  RunShape shape;
  RoundAggregator agg;
  ASSERT_TRUE(SubmitAll(&agg, {MakeReport(shape, "node-a", {0, 1, 2}),
                               MakeReport(shape, "node-b", {3, 4, 5})})[0]
                  .ok());
  EXPECT_EQ(agg.ForgetRun("no-such-run"), 0u);
  EXPECT_EQ(agg.ForgetRun(shape.run_id), 1u);
  EXPECT_EQ(agg.ForgetRun(shape.run_id), 0u);
  // The same run_id from scratch: its round 0 is a new round, not a late report.
  RunShape restarted = shape;
  restarted.taken = 2;
  const std::vector<Result> again = SubmitAll(
      &agg, {MakeReport(restarted, "node-a", {0, 1, 2}), MakeReport(restarted, "node-b", {3, 4, 5})});
  ASSERT_TRUE(again[0].ok()) << again[0].status();
  EXPECT_EQ(again[0]->checkpoint(), again[1]->checkpoint());
}

TEST(RoundAggregatorTest, FailedWriteFailsTheRoundForEveryone) {
  RunShape shape;
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/not-a-dir", "x").ok());
  shape.aggregate_dir = dir + "/not-a-dir";
  RoundAggregator agg;
  const std::vector<Result> results =
      SubmitAll(&agg, {MakeReport(shape, "node-a", {0, 1, 2}), MakeReport(shape, "node-b", {3, 4, 5})});
  for (const Result& r : results) {
    EXPECT_FALSE(r.ok());
    EXPECT_TRUE(MessageHas(r.status(), "cannot write the merged checkpoint"));
    EXPECT_EQ(r.status(), results[0].status());
  }
}

TEST(RoundAggregatorTest, UnreachableStoreFailsTheRoundAsAbortedNotUnavailable) {
  // Port 1 on loopback refuses connections: the S3 store is down. Followers must not
  // read the outcome as UNAVAILABLE ("the leader is unreachable, find another").
  setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1", 1);
  setenv("AWS_ACCESS_KEY_ID", "key", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
  RunShape shape;
  shape.aggregate_dir = "s3://zephon-test/agg";
  RoundAggregator agg;
  const std::vector<Result> results =
      SubmitAll(&agg, {MakeReport(shape, "node-a", {0, 1, 2}), MakeReport(shape, "node-b", {3, 4, 5})});
  unsetenv("AWS_ENDPOINT_URL");
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  for (const Result& r : results) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kAborted) << r.status();
    EXPECT_TRUE(MessageHas(r.status(), "s3://zephon-test/agg/run-1/checkpoint-00000000.zckpt"))
        << r.status();
  }
}

TEST(RoundAggregatorTest, RunsAndRoundsAreIndependent) {
  RunShape x;
  x.run_id = "run-x";
  x.timeout_s = 30;
  RunShape y = x;
  y.run_id = "run-y";
  RunShape x1 = x;
  x1.round = 1;
  RoundAggregator agg;
  Result pending_x = absl::UnknownError("not run");
  std::thread waiter([&] { pending_x = agg.Submit(MakeReport(x, "node-a", {0, 1, 2}), In(absl::Seconds(30))); });
  WaitPending(agg, 1);
  for (const RunShape& shape : {y, x1}) {
    const std::vector<Result> done = SubmitAll(
        &agg, {MakeReport(shape, "node-a", {0, 1, 2}), MakeReport(shape, "node-b", {3, 4, 5})});
    EXPECT_TRUE(done[0].ok() && done[1].ok()) << done[0].status() << done[1].status();
  }
  EXPECT_EQ(agg.pending_rounds(), 1u);
  ASSERT_TRUE(agg.Submit(MakeReport(x, "node-b", {3, 4, 5}), In(absl::Seconds(30))).ok());
  waiter.join();
  EXPECT_TRUE(pending_x.ok()) << pending_x.status();
}

TEST(RoundAggregatorTest, FinishedRoundsAreBounded) {
  RoundAggregatorOptions options;
  options.finished_rounds_per_run = 2;
  RoundAggregator agg(options);
  RunShape shape;
  shape.world_size = 2;
  for (uint64_t round = 0; round < 4; ++round) {
    shape.round = round;
    ASSERT_TRUE(agg.Submit(MakeReport(shape, "node-a", {0, 1}), In(absl::Seconds(5))).ok());
  }
  // Rounds 2 and 3 are remembered; round 0 was forgotten, so its (partial) report starts
  // a new round instead of getting the old bytes.
  shape.round = 3;
  EXPECT_TRUE(agg.Submit(MakeReport(shape, "node-a", {0, 1}), In(absl::Seconds(5))).ok());
  shape.round = 0;
  shape.timeout_s = 0.05;
  EXPECT_EQ(agg.Submit(MakeReport(shape, "node-a", {0}), In(absl::Seconds(5))).status().code(),
            absl::StatusCode::kDeadlineExceeded);
}

TEST(RoundAggregatorTest, ShutdownWakesEveryWaiterWithUnavailable) {
  RunShape shape;
  RoundAggregator agg;
  Result waiting = absl::UnknownError("not run");
  std::thread waiter([&] { waiting = agg.Submit(MakeReport(shape, "node-a", {0, 1}), In(absl::Seconds(30))); });
  WaitPending(agg, 1);
  agg.Shutdown();
  waiter.join();
  EXPECT_EQ(waiting.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(MessageHas(waiting.status(), "shutting down"));
  EXPECT_EQ(agg.Submit(MakeReport(shape, "node-b", {2, 3}), In(absl::Seconds(1))).status().code(),
            absl::StatusCode::kUnavailable);
}

TEST(RoundAggregatorTest, MalformedReportsAreRejected) {
  RunShape shape;
  RoundAggregator agg;
  proto::CheckpointReport no_run = MakeReport(shape, "node-a", {0});
  no_run.clear_run_id();
  EXPECT_EQ(agg.Submit(no_run, In(absl::Seconds(1))).status().code(),
            absl::StatusCode::kInvalidArgument);
  proto::CheckpointReport escape = MakeReport(shape, "node-a", {0});
  escape.set_run_id("..");
  escape.set_aggregate_dir("/tmp");
  EXPECT_EQ(agg.Submit(escape, In(absl::Seconds(1))).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// ---- Decided by the Env: a fake clock and an injected write fault ----

// node-a's report waits on its own thread; node-b's arrives after `arrives_after` on
// the fake clock (the round's timeout is 60 s). Nothing sleeps for the timeout.
std::vector<Result> SecondReportAfter(absl::Duration arrives_after) {
  FakeEnv env;
  RoundAggregatorOptions options;
  options.env = &env;
  RoundAggregator agg(options);
  RunShape shape;
  shape.world_size = 4;
  shape.timeout_s = 60;
  std::vector<Result> results(2, absl::UnknownError("not run"));
  std::thread first([&] {
    results[0] = agg.Submit(MakeReport(shape, "node-a", {0, 1}), env.Now() + absl::Hours(1));
  });
  WaitPending(agg, 1);
  env.Advance(arrives_after);
  results[1] = agg.Submit(MakeReport(shape, "node-b", {2, 3}), env.Now() + absl::Hours(1));
  first.join();
  return results;
}

TEST(RoundAggregatorEnvTest, TheRoundDeadlineIsDecidedByTheEnvClock) {
  for (const Result& r : SecondReportAfter(absl::Seconds(59))) {
    EXPECT_TRUE(r.ok()) << r.status();
  }
  for (const Result& r : SecondReportAfter(absl::Seconds(61))) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded) << r.status();
    EXPECT_TRUE(MessageHas(r.status(), "timed out after 60 s waiting for ranks [2-3]"));
  }
}

TEST(RoundAggregatorEnvTest, AFullDiskFailsTheRoundNamingThePathAndLeavesNoFile) {
  FakeEnv env;
  env.FailNext(FakeEnv::Op::kWrite, 1, ENOSPC);
  RoundAggregatorOptions options;
  options.env = &env;
  RoundAggregator agg(options);
  RunShape shape;
  shape.world_size = 2;
  shape.aggregate_dir = MakeTempDir();
  const Result r = agg.Submit(MakeReport(shape, "node-a", {0, 1}), env.Now() + absl::Hours(1));
  EXPECT_EQ(env.faults_fired(FakeEnv::Op::kWrite), 1);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted) << r.status();
  EXPECT_TRUE(MessageHas(r.status(), "checkpoint round 0 of run run-1: cannot write the merged "
                                     "checkpoint: cannot write " +
                                         CheckpointPath(shape.aggregate_dir, "run-1", 0)));
  // Half the bytes had reached a temp file when the write failed; it is gone too.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(shape.aggregate_dir)) {
    EXPECT_TRUE(entry.is_directory()) << "left behind: " << entry.path();
  }
}

}  // namespace
}  // namespace zephon::checkpoint
