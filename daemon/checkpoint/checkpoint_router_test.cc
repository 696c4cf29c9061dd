// CheckpointRouter when the leader of a run turns out to be its own daemon: rank 0
// attaches here while a follower's report waits for the rendezvous file.
#include "daemon/checkpoint/checkpoint_router.h"

#include <atomic>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "daemon/checkpoint/aggregate_dir.h"
#include "daemon/checkpoint/round_aggregator.h"
#include "daemon/checkpoint/round_testing.h"
#include "gtest/gtest.h"

namespace zephon::checkpoint {
namespace {

using testing::In;
using testing::MakeReport;
using testing::MessageHas;
using testing::Result;
using testing::RunShape;

class RouterSelfLeaderTest : public ::testing::Test {
 protected:
  RouterSelfLeaderTest() {
    shape_.world_size = 1;
    shape_.ranks_per_group = 1;
    shape_.lanes_per_group = 1;
    shape_.aggregate_dir = testing::MakeTempDir("router");
    route_.run_id = shape_.run_id;
    route_.aggregate_dir = shape_.aggregate_dir;
  }
  // A router of a daemon whose peer address is `own_address` ("" = no peer service),
  // leading the run once leads_ is set.
  // `own_instance` is its per-process id ("" = an older daemon's router).
  std::unique_ptr<CheckpointRouter> Router(const std::string& own_address,
                                           const std::string& own_instance = "",
                                           const std::string& own_label = "") {
    return std::make_unique<CheckpointRouter>(
        &aggregator_, nullptr, storage::S3Options(), nullptr, Env::Default(),
        [this](const std::string& run_id) { return leads_.load() && run_id == shape_.run_id; },
        own_address, own_instance, own_label);
  }
  // What rank 0's attach writes first, before the registry knows the rank.
  void WriteLeaderFile(const std::string& address, const std::string& label,
                       const std::string& instance = "") {
    absl::StatusOr<std::unique_ptr<AggregateDir>> dir =
        AggregateDir::Open(shape_.aggregate_dir, storage::S3Options());
    ASSERT_TRUE(dir.ok()) << dir.status();
    ASSERT_TRUE((*dir)->WriteLeader(shape_.run_id, address, label, instance).ok());
  }
  // Submits as a follower (leads=false) from another thread; rank 0 then registers.
  Result SubmitThenAttachRank0(const CheckpointRouter& router) {
    Result result = absl::UnknownError("not run");
    std::thread follower([&] {
      result = router.Submit(MakeReport(shape_, "node-a", {0}), route_, false,
                             In(absl::Seconds(20)));
    });
    absl::SleepFor(absl::Milliseconds(300));  // the router is polling the leader file
    leads_ = true;
    follower.join();
    return result;
  }

  RunShape shape_;
  LeaderRoute route_;
  RoundAggregator aggregator_;
  std::atomic<bool> leads_{false};
};

TEST_F(RouterSelfLeaderTest, LeaderFileWithoutPeerServiceNamingThisDaemonWaitsForRank0) {
  WriteLeaderFile("", "node-a");
  const Result result = SubmitThenAttachRank0(*Router(""));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->checkpoint().empty());
}

TEST_F(RouterSelfLeaderTest, LeaderFileWithOurOwnAddressWaitsForRank0) {
  WriteLeaderFile("127.0.0.1:9", "node-a");  // nothing listens there: never dialled
  const Result result = SubmitThenAttachRank0(*Router("127.0.0.1:9"));
  ASSERT_TRUE(result.ok()) << result.status();
}

TEST_F(RouterSelfLeaderTest, ServingPeersAFollowerOfALeaderWithoutPeersFailsAtOnce) {
  WriteLeaderFile("", "node-b");  // another daemon leads, and serves no peers
  const absl::Time begun = absl::Now();
  const Result result = Router("127.0.0.1:9")->Submit(MakeReport(shape_, "node-a", {0}), route_,
                                                      false, In(absl::Seconds(20)));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition) << result.status();
  EXPECT_TRUE(MessageHas(result.status(), "serves no peers"));
  EXPECT_LT(absl::Now() - begun, absl::Seconds(5));
}

TEST_F(RouterSelfLeaderTest, WithoutPeerServiceTheInstanceIdRecognizesThisDaemon) {
  // Both daemons use the same socket path (one per node): only the instance tells.
  WriteLeaderFile("", "/run/zephon/zephond.sock", "instance-a");
  const Result result = SubmitThenAttachRank0(*Router("", "instance-a"));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->checkpoint().empty());
}

TEST_F(RouterSelfLeaderTest, WithoutPeerServiceAFileOfThisDaemonsEarlierProcessWaitsForRank0) {
  // zephond restarted (a new instance id); the run's old file names its label on this
  // host, and rank 0's attach here will rewrite it.
  WriteLeaderFile("", "/run/zephon/zephond.sock", "instance-before-restart");
  const Result result =
      SubmitThenAttachRank0(*Router("", "instance-now", "/run/zephon/zephond.sock"));
  ASSERT_TRUE(result.ok()) << result.status();
}

TEST_F(RouterSelfLeaderTest, WithoutPeerServiceAnotherDaemonsLeaderFileFailsAtOnce) {
  // Before instance ids, a daemon without a peer port took any such file for its own and
  // waited until the deadline.
  WriteLeaderFile("", "/run/zephon/zephond.sock", "instance-b");
  {  // The same socket path, on another node.
    std::ofstream leader(shape_.aggregate_dir + "/" + shape_.run_id + "/leader",
                         std::ios::trunc);
    leader << "peer_service=none\npid=1\ndaemon=/run/zephon/zephond.sock\n"
              "instance=instance-b\nhost=another-node.invalid\n";
  }
  const absl::Time begun = absl::Now();
  const Result result =
      Router("", "instance-a", "/run/zephon/zephond.sock")
          ->Submit(MakeReport(shape_, "node-a", {0}), route_, false, In(absl::Seconds(20)));
  EXPECT_EQ(result.status().code(), absl::StatusCode::kFailedPrecondition) << result.status();
  EXPECT_TRUE(MessageHas(result.status(), "serves no peers"));
  EXPECT_TRUE(MessageHas(result.status(), "/run/zephon/zephond.sock"));
  EXPECT_LT(absl::Now() - begun, absl::Seconds(5));
}

}  // namespace
}  // namespace zephon::checkpoint
