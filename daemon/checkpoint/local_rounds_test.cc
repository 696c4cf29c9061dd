#include "daemon/checkpoint/local_rounds.h"

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "daemon/checkpoint/leader_reporter.h"
#include "daemon/checkpoint/round_aggregator.h"
#include "daemon/metrics/counters.h"
#include "gtest/gtest.h"

namespace zephon::checkpoint {
namespace {

// A leader that records every report and answers with a fixed checkpoint.
class FakeLeader final : public LeaderReporter {
 public:
  absl::StatusOr<proto::CheckpointResult> Submit(const proto::CheckpointReport& report,
                                                 const LeaderRoute& route, bool leads,
                                                 absl::Time) const override {
    absl::MutexLock lock(&mu_);
    reports_.push_back(report);
    routes_.push_back(route);
    leads_.push_back(leads);
    if (!report.failure().empty()) return absl::AbortedError(report.failure());
    proto::CheckpointResult result;
    result.set_checkpoint("merged");
    return result;
  }
  std::vector<proto::CheckpointReport> reports() const {
    absl::MutexLock lock(&mu_);
    return reports_;
  }
  std::vector<LeaderRoute> routes() const {
    absl::MutexLock lock(&mu_);
    return routes_;
  }
  std::vector<bool> leads() const {
    absl::MutexLock lock(&mu_);
    return leads_;
  }

 private:
  mutable absl::Mutex mu_;
  mutable std::vector<proto::CheckpointReport> reports_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<LeaderRoute> routes_ ABSL_GUARDED_BY(mu_);
  mutable std::vector<bool> leads_ ABSL_GUARDED_BY(mu_);
};

class FakeRoster final : public RunRoster {
 public:
  explicit FakeRoster(std::set<uint32_t> ranks) : ranks_(std::move(ranks)) {}
  std::set<uint32_t> LocalRanksOfRun(const std::string&) const override { return ranks_; }

 private:
  const std::set<uint32_t> ranks_;
};

// A roster that ranks join while a round is open (ranks attach when they please).
class GrowingRoster final : public RunRoster {
 public:
  explicit GrowingRoster(std::set<uint32_t> ranks) : ranks_(std::move(ranks)) {}
  std::set<uint32_t> LocalRanksOfRun(const std::string&) const override {
    absl::MutexLock lock(&mu_);
    return ranks_;
  }
  void Attach(uint32_t rank) {
    absl::MutexLock lock(&mu_);
    ranks_.insert(rank);
  }

 private:
  mutable absl::Mutex mu_;
  std::set<uint32_t> ranks_ ABSL_GUARDED_BY(mu_);
};

// The real leader in-process: this daemon leads; every report goes to the aggregator.
class InProcessLeader final : public LeaderReporter {
 public:
  explicit InProcessLeader(RoundAggregator* aggregator) : aggregator_(aggregator) {}
  absl::StatusOr<proto::CheckpointResult> Submit(const proto::CheckpointReport& report,
                                                 const LeaderRoute&, bool leads,
                                                 absl::Time deadline) const override {
    if (!leads) return absl::InternalError("reported to a remote leader");
    return aggregator_->Submit(report, deadline);
  }

 private:
  RoundAggregator* const aggregator_;
};

// One lane (`lane`) whose position is the number of batches taken.
class FakeProgress final : public ProgressSource {
 public:
  explicit FakeProgress(uint32_t lane = 0) : lane_(lane) {}
  absl::StatusOr<std::vector<proto::LaneProgress>> ProgressAfter(
      uint64_t n_taken) const override {
    proto::LaneProgress lane;
    lane.set_lane(lane_);
    lane.set_next_batch_index(n_taken);
    return std::vector<proto::LaneProgress>{lane};
  }

 private:
  const uint32_t lane_;
};

std::shared_ptr<const RoundInstance> Instance(const std::string& id, uint32_t dp_group_id) {
  auto instance = std::make_shared<RoundInstance>();
  instance->instance_id = id;
  instance->spec_hash = "hash";
  instance->world_size = 2;
  instance->canonical_replicas = 1;
  instance->dp_degree = 1;
  instance->dp_group_id = dp_group_id;
  instance->route.run_id = "run";
  instance->route.aggregate_dir = "/agg";
  instance->progress = std::make_shared<FakeProgress>();
  return instance;
}

RoundCall Call(uint32_t rank, uint64_t taken, std::shared_ptr<const RoundInstance> instance) {
  RoundCall call;
  call.run_id = "run";
  call.round = 3;
  call.global_rank = rank;
  call.taken = taken;
  call.instance = std::move(instance);
  return call;
}

// The LocalRounds of daemon "node-a".
LocalRounds RoundsOf(const RunRoster* roster, const LeaderReporter* leader,
                     metrics::DaemonCounters* counters) {
  LocalRoundsOptions options;
  options.daemon_label = "node-a";
  options.roster = roster;
  options.reporter = leader;
  options.counters = counters;
  return LocalRounds(std::move(options));
}

class LocalRoundsTest : public ::testing::Test {
 protected:
  LocalRounds MakeRounds(const RunRoster* roster) {
    return RoundsOf(roster, &leader_, &counters_);
  }
  FakeLeader leader_;
  metrics::DaemonCounters counters_;
};

TEST_F(LocalRoundsTest, LocalRanksShareOnePreMergedReportToTheLeader) {
  FakeRoster roster({0, 1});
  LocalRounds rounds = MakeRounds(&roster);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::StatusOr<proto::CheckpointResult> first;
  std::thread other([&] { first = rounds.Participate(Call(1, 5, Instance("i1", 1)), deadline); });
  absl::StatusOr<proto::CheckpointResult> second =
      rounds.Participate(Call(0, 5, Instance("i0", 0)), deadline);
  other.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->checkpoint(), "merged");
  EXPECT_EQ(second->checkpoint(), "merged");

  const std::vector<proto::CheckpointReport> reports = leader_.reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].daemon(), "node-a");
  EXPECT_EQ(reports[0].round(), 3u);
  EXPECT_EQ(reports[0].ranks_size(), 2);
  EXPECT_EQ(reports[0].lanes_size(), 2);  // one per instance
  EXPECT_EQ(reports[0].aggregate_dir(), "/agg");
  EXPECT_EQ(leader_.routes()[0].run_id, "run");
  EXPECT_TRUE(leader_.leads()[0]);  // global_rank 0 is local
  EXPECT_EQ(counters_.rounds_ok(), 1u);
  EXPECT_EQ(counters_.rounds_error(), 0u);
  const std::optional<metrics::DaemonCounters::RoundOutcome> last = counters_.last_round();
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(last->run_id, "run");
  EXPECT_EQ(last->round, 3u);
  EXPECT_EQ(last->result, metrics::DaemonCounters::RoundResult::kOk);
  EXPECT_LE(last->started, last->finished);
  EXPECT_EQ(last->error, "");
}

TEST_F(LocalRoundsTest, PeersThatDisagreeFailLocallyAndTellTheLeader) {
  FakeRoster roster({2, 3});
  LocalRounds rounds = MakeRounds(&roster);
  const std::shared_ptr<const RoundInstance> shared = Instance("i", 1);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  absl::StatusOr<proto::CheckpointResult> first;
  std::thread other([&] { first = rounds.Participate(Call(3, 7, shared), deadline); });
  absl::StatusOr<proto::CheckpointResult> second = rounds.Participate(Call(2, 6, shared), deadline);
  other.join();
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(first.status(), second.status());
  EXPECT_NE(second.status().message().find("peers disagree"), std::string::npos)
      << second.status();

  const std::vector<proto::CheckpointReport> reports = leader_.reports();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_FALSE(reports[0].failure().empty());
  EXPECT_FALSE(leader_.leads()[0]);  // global_rank 0 is elsewhere
  EXPECT_EQ(counters_.rounds_error(), 1u);
}

TEST_F(LocalRoundsTest, MissingLocalRankTimesOutNamingIt) {
  FakeRoster roster({0, 4});
  LocalRounds rounds = MakeRounds(&roster);
  absl::StatusOr<proto::CheckpointResult> result =
      rounds.Participate(Call(0, 1, Instance("i", 0)), absl::Now() + absl::Milliseconds(50));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(result.status().message().find("ranks [4]"), std::string::npos) << result.status();
  EXPECT_TRUE(leader_.reports().empty());
  EXPECT_EQ(counters_.rounds_timeout(), 1u);  // counted, as a timeout
  EXPECT_EQ(counters_.rounds_error(), 0u);
  EXPECT_EQ(counters_.errors(metrics::ErrorKind::kCheckpoint), 1u);
  ASSERT_TRUE(counters_.last_round().has_value());
  EXPECT_EQ(counters_.last_round()->result, metrics::DaemonCounters::RoundResult::kTimeout);
  EXPECT_NE(counters_.last_round()->error.find("ranks [4]"), std::string::npos);
}

TEST_F(LocalRoundsTest, TimeoutNamesOnlyTheRanksStillMissingAtTheDeadline) {
  // Rank 0 starts waiting while 4 and 5 are missing; 5 calls during the wait; the
  // timeout names 4 alone.
  FakeRoster roster({0, 4, 5});
  LocalRounds rounds = MakeRounds(&roster);
  const absl::Time deadline = absl::Now() + absl::Milliseconds(400);
  absl::StatusOr<proto::CheckpointResult> late;
  std::thread other([&] {
    absl::SleepFor(absl::Milliseconds(100));
    late = rounds.Participate(Call(5, 1, Instance("i", 0)), deadline);
  });
  absl::StatusOr<proto::CheckpointResult> first =
      rounds.Participate(Call(0, 1, Instance("i", 0)), deadline);
  other.join();
  EXPECT_EQ(first.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(first.status(), late.status());
  EXPECT_NE(first.status().message().find("ranks [4] "), std::string::npos) << first.status();
  EXPECT_EQ(counters_.rounds_timeout(), 1u);
}

TEST_F(LocalRoundsTest, ARankCallingAFailedRoundLateGetsItsFailureAtOnce) {
  FakeRoster roster({0, 4});
  LocalRounds rounds = MakeRounds(&roster);
  absl::StatusOr<proto::CheckpointResult> first =
      rounds.Participate(Call(0, 1, Instance("i", 0)), absl::Now() + absl::Milliseconds(50));
  ASSERT_EQ(first.status().code(), absl::StatusCode::kDeadlineExceeded);
  // Rank 4 arrives after rank 0 gave up: it must not wait out a fresh round of its own.
  const absl::Time begun = absl::Now();
  absl::StatusOr<proto::CheckpointResult> late =
      rounds.Participate(Call(4, 1, Instance("i", 0)), absl::Now() + absl::Seconds(10));
  EXPECT_LT(absl::Now() - begun, absl::Seconds(5));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(late.status().message().find("ranks [4]"), std::string::npos) << late.status();
  EXPECT_NE(late.status().message().find("rank 4 called checkpoint() for this round after"),
            std::string::npos)
      << late.status();
  EXPECT_TRUE(leader_.reports().empty());
}

TEST_F(LocalRoundsTest, ANewInstanceOfTheRunOpensAFreshRoundOfAFailedNumber) {
  FakeRoster roster({0, 4});
  LocalRounds rounds = MakeRounds(&roster);
  ASSERT_EQ(rounds.Participate(Call(0, 1, Instance("old", 0)), absl::Now() + absl::Milliseconds(50))
                .status()
                .code(),
            absl::StatusCode::kDeadlineExceeded);
  // The job restarts from an earlier checkpoint (a new instance): its rounds count again
  // from there and must not inherit the old instance's failure.
  // Rank 4 of the new instance opens a fresh round (which waits for rank 0, then times
  // out naming it), not the old failure.
  absl::StatusOr<proto::CheckpointResult> again =
      rounds.Participate(Call(4, 1, Instance("new", 0)), absl::Now() + absl::Milliseconds(50));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(again.status().message().find("ranks [0]"), std::string::npos) << again.status();
  EXPECT_EQ(again.status().message().find("after it had failed"), std::string::npos)
      << again.status();
}

TEST_F(LocalRoundsTest, ShutdownRefusesLaterCalls) {
  FakeRoster roster({0});
  LocalRounds rounds = MakeRounds(&roster);
  rounds.Shutdown();
  absl::StatusOr<proto::CheckpointResult> result =
      rounds.Participate(Call(0, 1, Instance("i", 0)), absl::Now() + absl::Seconds(1));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable);
}

// Two DP groups of one rank each, both on this daemon, lane g in group g; rounds end
// after `timeout_s` at the leader.
std::shared_ptr<const RoundInstance> GroupInstance(uint32_t group, double timeout_s) {
  auto instance = std::make_shared<RoundInstance>();
  instance->instance_id = absl::StrCat("i", group);
  instance->spec_hash = "hash";
  instance->world_size = 2;
  instance->canonical_replicas = 2;
  instance->dp_degree = 2;
  instance->dp_group_id = group;
  instance->aggregate_timeout_s = timeout_s;
  instance->route.run_id = "run";
  instance->progress = std::make_shared<FakeProgress>(group);
  return instance;
}

class LateAttachTest : public ::testing::Test {
 protected:
  LateAttachTest() : leader_(&aggregator_) {}
  LocalRounds MakeRounds(const RunRoster* roster) {
    return RoundsOf(roster, &leader_, &counters_);
  }
  // Waits until rank 0's report reached the leader (its round is collecting there).
  void AwaitLeaderRound() {
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (aggregator_.pending_rounds() == 0 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    ASSERT_EQ(aggregator_.pending_rounds(), 1u);
  }
  RoundAggregator aggregator_;
  InProcessLeader leader_;
  metrics::DaemonCounters counters_;
};

TEST_F(LateAttachTest, RankAttachingAfterTheFirstCallJoinsTheRound) {
  GrowingRoster roster({0});  // rank 1 has not attached yet
  LocalRounds rounds = MakeRounds(&roster);
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  absl::StatusOr<proto::CheckpointResult> first;
  std::thread rank0(
      [&] { first = rounds.Participate(Call(0, 4, GroupInstance(0, 20)), deadline); });
  AwaitLeaderRound();
  roster.Attach(1);  // attaches and calls while rank 0's round is open
  absl::StatusOr<proto::CheckpointResult> second =
      rounds.Participate(Call(1, 4, GroupInstance(1, 20)), absl::Now() + absl::Seconds(20));
  rank0.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(first->checkpoint(), second->checkpoint());
  absl::StatusOr<proto::CheckpointState> state = DecodeCheckpoint(first->checkpoint());
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(state->ranks_size(), 2);
  EXPECT_EQ(state->lanes_size(), 2);
  EXPECT_EQ(counters_.rounds_ok(), 1u);  // one round, though two reports
  EXPECT_EQ(counters_.rounds_error(), 0u);
}

TEST_F(LateAttachTest, RankThatNeverComesStillFailsTheRoundNamingIt) {
  GrowingRoster roster({0});
  LocalRounds rounds = MakeRounds(&roster);
  const absl::Time begun = absl::Now();
  absl::StatusOr<proto::CheckpointResult> result =
      rounds.Participate(Call(0, 4, GroupInstance(0, 0.3)), absl::Now() + absl::Seconds(0.3));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kDeadlineExceeded) << result.status();
  EXPECT_NE(result.status().message().find("ranks [1]"), std::string::npos) << result.status();
  EXPECT_LT(absl::Now() - begun, absl::Seconds(10));
}

TEST_F(LateAttachTest, AttachedRankIsWaitedForBeforeAnyReport) {
  GrowingRoster roster({0});
  LocalRounds rounds = MakeRounds(&roster);
  roster.Attach(1);  // attached before rank 0 calls: one report for both
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  absl::StatusOr<proto::CheckpointResult> first;
  std::thread rank0(
      [&] { first = rounds.Participate(Call(0, 4, GroupInstance(0, 20)), deadline); });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(aggregator_.pending_rounds(), 0u);  // still waiting for rank 1 locally
  absl::StatusOr<proto::CheckpointResult> second =
      rounds.Participate(Call(1, 4, GroupInstance(1, 20)), deadline);
  rank0.join();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(counters_.rounds_ok(), 1u);  // one report
}

TEST(FormatRanks, CompactsRuns) {
  EXPECT_EQ(FormatRanks({0, 1, 2, 3, 5, 9, 10}), "0-3,5,9-10");
  EXPECT_EQ(FormatRanks({}), "");
}

}  // namespace
}  // namespace zephon::checkpoint
