#include "daemon/checkpoint/rendezvous.h"

#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "daemon/checkpoint/round_testing.h"
#include "gtest/gtest.h"

namespace zephon::checkpoint {
namespace {

std::string MakeTempDir() { return testing::MakeTempDir("rdv"); }

TEST(RendezvousTest, CheckpointPathHasEightDigitRound) {
  EXPECT_EQ(CheckpointPath("/agg", "run-1", 7), "/agg/run-1/checkpoint-00000007.zckpt");
  EXPECT_EQ(CheckpointPath("/agg/", "r", 123456789), "/agg/r/checkpoint-123456789.zckpt");
  EXPECT_EQ(CheckpointPath("/", "r", 0), "/r/checkpoint-00000000.zckpt");
}

TEST(RendezvousTest, LeaderRoundTripsWithPidAndLabel) {
  const std::string agg = MakeTempDir();
  ASSERT_TRUE(WriteLeader(agg, "run-1", "10.0.0.5:7000", "node-a").ok());
  absl::StatusOr<std::string> address = ReadLeader(agg, "run-1");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(*address, "10.0.0.5:7000");
  EXPECT_EQ(*ReadFile(agg + "/run-1/leader"),
            absl::StrCat("address=10.0.0.5:7000\npid=", ::getpid(), "\ndaemon=node-a\n"));
  // A new leader replaces the old one.
  ASSERT_TRUE(WriteLeader(agg, "run-1", "10.0.0.6:7000", "node-b").ok());
  EXPECT_EQ(*ReadLeader(agg, "run-1"), "10.0.0.6:7000");
}

TEST(RendezvousTest, MissingLeaderIsNotFoundNamingThePath) {
  const std::string agg = MakeTempDir();
  absl::StatusOr<std::string> address = ReadLeader(agg, "run-2");
  EXPECT_EQ(address.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(address.status().message()).find(agg + "/run-2/leader"),
            std::string::npos)
      << address.status();
}

TEST(RendezvousTest, LeaderFileWithoutAddressIsDataLoss) {
  const std::string agg = MakeTempDir();
  ASSERT_TRUE(WriteFileAtomically(agg + "/run/leader", "pid=1\n").ok());
  EXPECT_EQ(ReadLeader(agg, "run").status().code(), absl::StatusCode::kDataLoss);
}

TEST(RendezvousTest, UnsafeRunIdsAreRejected) {
  const std::string agg = MakeTempDir();
  for (const std::string run_id : {"", "..", ".", "a/b", "x y"}) {
    EXPECT_EQ(WriteLeader(agg, run_id, "h:1", "n").code(), absl::StatusCode::kInvalidArgument)
        << run_id;
    EXPECT_EQ(ReadLeader(agg, run_id).status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(WriteLeader("", "run", "h:1", "n").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteLeader(agg, "run", "", "n").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WriteLeader(agg, "run", "h:1", "a\nb").code(), absl::StatusCode::kInvalidArgument);
}

TEST(RendezvousTest, WriteCheckpointFileReturnsItsPath) {
  const std::string agg = MakeTempDir();
  absl::StatusOr<std::string> path = WriteCheckpointFile(agg, "run", 3, "bytes");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, CheckpointPath(agg, "run", 3));
  EXPECT_EQ(*ReadFile(*path), "bytes");
}

}  // namespace
}  // namespace zephon::checkpoint
