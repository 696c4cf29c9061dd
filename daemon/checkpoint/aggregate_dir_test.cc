#include "daemon/checkpoint/aggregate_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "daemon/checkpoint/round_testing.h"
#include "daemon/storage/local_store.h"
#include "gtest/gtest.h"

namespace zephon::checkpoint {
namespace {

std::string MakeTempDir() { return testing::MakeTempDir("agg"); }

std::unique_ptr<AggregateDir> OpenDir(const std::string& dir) {
  absl::StatusOr<std::unique_ptr<AggregateDir>> agg = AggregateDir::Open(dir, storage::S3Options());
  EXPECT_TRUE(agg.ok()) << agg.status();
  return agg.ok() ? *std::move(agg) : nullptr;
}

TEST(AggregateDirTest, LocationsJoinPathsAndUrls) {
  EXPECT_EQ(CheckpointPath("/agg", "run-1", 7), "/agg/run-1/checkpoint-00000007.zckpt");
  EXPECT_EQ(CheckpointPath("/agg/", "r", 123456789), "/agg/r/checkpoint-123456789.zckpt");
  EXPECT_EQ(CheckpointPath("/", "r", 0), "/r/checkpoint-00000000.zckpt");
  EXPECT_EQ(CheckpointPath("s3://b/runs/agg/", "r", 1), "s3://b/runs/agg/r/checkpoint-00000001.zckpt");
  EXPECT_EQ(CheckpointPath("s3://b", "r", 1), "s3://b/r/checkpoint-00000001.zckpt");
  EXPECT_EQ(JoinLocation("file:///x//", "k"), "file:///x/k");
}

TEST(AggregateDirTest, LeaderRoundTripsWithPidAndLabel) {
  const std::string dir = MakeTempDir();
  auto agg = OpenDir(dir);
  ASSERT_TRUE(agg->WriteLeader("run-1", "10.0.0.5:7000", "node-a").ok());
  absl::StatusOr<std::string> address = agg->ReadLeader("run-1");
  ASSERT_TRUE(address.ok()) << address.status();
  EXPECT_EQ(*address, "10.0.0.5:7000");
  EXPECT_EQ(*ReadFile(dir + "/run-1/leader"),
            absl::StrCat("address=10.0.0.5:7000\npid=", ::getpid(), "\ndaemon=node-a\n",
               LocalHostName().empty() ? "" : absl::StrCat("host=", LocalHostName(), "\n")));
  // A new leader replaces the old one.
  ASSERT_TRUE(agg->WriteLeader("run-1", "10.0.0.6:7000", "node-b").ok());
  EXPECT_EQ(*agg->ReadLeader("run-1"), "10.0.0.6:7000");
}

TEST(AggregateDirTest, MissingLeaderIsNotFoundNamingThePath) {
  const std::string dir = MakeTempDir();
  absl::StatusOr<std::string> address = OpenDir(dir)->ReadLeader("run-2");
  EXPECT_EQ(address.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(address.status().message()).find(dir + "/run-2/leader"),
            std::string::npos)
      << address.status();
}

TEST(AggregateDirTest, LeaderFileWithoutAddressIsDataLoss) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/run/leader", "pid=1\n").ok());
  EXPECT_EQ(OpenDir(dir)->ReadLeader("run").status().code(), absl::StatusCode::kDataLoss);
}

TEST(AggregateDirTest, UnreadableLeaderIsNotMistakenForAMissingOne) {
  const std::string dir = MakeTempDir();
  // A directory where the leader file should be: a store error, not NOT_FOUND, so a
  // follower stops polling and reports it.
  ASSERT_EQ(::mkdir((dir + "/run").c_str(), 0755), 0);
  ASSERT_EQ(::mkdir((dir + "/run/leader").c_str(), 0755), 0);
  absl::StatusOr<std::string> address = OpenDir(dir)->ReadLeader("run");
  EXPECT_FALSE(address.ok());
  EXPECT_NE(address.status().code(), absl::StatusCode::kNotFound) << address.status();
  EXPECT_NE(std::string(address.status().message()).find("leader"), std::string::npos);
}

TEST(AggregateDirTest, UnsafeRunIdsAndAddressesAreRejected) {
  auto agg = OpenDir(MakeTempDir());
  for (const std::string run_id : {"", "..", ".", "a/b", "x y"}) {
    EXPECT_EQ(agg->WriteLeader(run_id, "h:1", "n").code(), absl::StatusCode::kInvalidArgument)
        << run_id;
    EXPECT_EQ(agg->ReadLeader(run_id).status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(agg->WriteCheckpoint(run_id, 0, "x").status().code(),
              absl::StatusCode::kInvalidArgument);
  }
  EXPECT_EQ(agg->WriteLeader("run", "h:1\n", "n").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(agg->WriteLeader("run", "h:1", "a\nb").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(agg->WriteLeader("run", "h:1", "n", "i\n").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AggregateDir::Open("", storage::S3Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AggregateDir::Open("gs://bucket/x", storage::S3Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(AggregateDirTest, ALeaderWithoutPeerServiceIsAnImmediateErrorNamingTheFix) {
  auto agg = OpenDir(MakeTempDir());
  ASSERT_TRUE(agg->WriteLeader("run", "", "node-a").ok());
  absl::StatusOr<std::string> address = agg->ReadLeader("run");
  EXPECT_EQ(address.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(address.status().message().find("node-a"), std::string::npos) << address.status();
  EXPECT_NE(address.status().message().find("--peer-address"), std::string::npos);
}

TEST(AggregateDirTest, TheLeaderRecordCarriesLabelAndInstanceWithOrWithoutAnAddress) {
  auto agg = OpenDir(MakeTempDir());
  ASSERT_TRUE(agg->WriteLeader("run", "", "/run/zephon/zephond.sock", "0123abcd").ok());
  absl::StatusOr<LeaderRecord> record = agg->ReadLeaderRecord("run");
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->address, "");
  EXPECT_EQ(record->daemon, "/run/zephon/zephond.sock");
  EXPECT_EQ(record->instance, "0123abcd");
  EXPECT_EQ(record->host, LocalHostName());
  ASSERT_TRUE(agg->WriteLeader("run", "h:1", "n").ok());  // an older writer: no instance
  record = agg->ReadLeaderRecord("run");
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->address, "h:1");
  EXPECT_EQ(record->instance, "");
}

TEST(AggregateDirTest, CheckpointsWriteReadListAndDelete) {
  const std::string dir = MakeTempDir();
  auto agg = OpenDir(dir);
  absl::StatusOr<std::string> path = agg->WriteCheckpoint("run", 3, "three");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, CheckpointPath(dir, "run", 3));
  EXPECT_EQ(*ReadFile(*path), "three");
  ASSERT_TRUE(agg->WriteCheckpoint("run", 12, "twelve!").ok());
  ASSERT_TRUE(agg->WriteCheckpoint("run", 123456789, "big").ok());
  ASSERT_TRUE(agg->WriteCheckpoint("other", 1, "x").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/run/checkpoint-00x.zckpt", "not a round").ok());
  // A non-canonical spelling of round 12: reads and deletes use the canonical key, so it
  // must not be listed as round 12 (prune would report one file and delete another).
  ASSERT_TRUE(WriteFileAtomically(dir + "/run/checkpoint-12.zckpt", "hand copy").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/run/notes.txt", "ignored").ok());

  EXPECT_EQ(*agg->ReadCheckpoint("run", 12), "twelve!");
  auto missing = agg->ReadCheckpoint("run", 4);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(missing.status().message()).find("checkpoint-00000004.zckpt"),
            std::string::npos);

  auto listed = agg->ListCheckpoints("run");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 3u);
  EXPECT_EQ((*listed)[0].round, 3u);
  EXPECT_EQ((*listed)[1].round, 12u);
  EXPECT_EQ((*listed)[1].info.size, 7u);
  EXPECT_EQ((*listed)[2].round, 123456789u);
  EXPECT_EQ((*listed)[2].location, CheckpointPath(dir, "run", 123456789));

  ASSERT_TRUE(agg->DeleteCheckpoint("run", 3).ok());
  ASSERT_TRUE(agg->DeleteCheckpoint("run", 3).ok());  // idempotent
  EXPECT_EQ(agg->ListCheckpoints("run")->size(), 2u);
  EXPECT_TRUE(agg->ListCheckpoints("nobody")->empty());
}

TEST(AggregateDirTest, ListRunsFindsLeadersAndCheckpoints) {
  const std::string dir = MakeTempDir();
  auto agg = OpenDir(dir);
  ASSERT_TRUE(agg->WriteLeader("b-run", "h:1", "n").ok());
  ASSERT_TRUE(agg->WriteCheckpoint("a-run", 2, "x").ok());
  ASSERT_TRUE(agg->WriteCheckpoint("a-run", 1, "x").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/c-run/unrelated", "x").ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/deep/er/checkpoint-00000001.zckpt", "x").ok());
  auto runs = agg->ListRuns();
  ASSERT_TRUE(runs.ok()) << runs.status();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].run_id, "a-run");
  EXPECT_FALSE((*runs)[0].has_leader);
  ASSERT_EQ((*runs)[0].checkpoints.size(), 2u);
  EXPECT_EQ((*runs)[0].checkpoints[0].round, 1u);
  EXPECT_EQ((*runs)[1].run_id, "b-run");
  EXPECT_TRUE((*runs)[1].has_leader);
  EXPECT_TRUE((*runs)[1].checkpoints.empty());
}

TEST(AggregateDirTest, ReadLocationReadsPathsAndRejectsOthers) {
  const storage::S3Options s3;  // s3:// locations connect as the environment says
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/r/checkpoint-00000001.zckpt", "abc").ok());
  auto got = ReadLocation(dir + "/r/checkpoint-00000001.zckpt", s3);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->bytes, "abc");
  EXPECT_EQ(got->info.size, 3u);
  EXPECT_EQ(ReadLocation(dir + "/r/none", s3).status().code(), absl::StatusCode::kNotFound);
  // A missing parent directory is reported, not created.
  EXPECT_EQ(ReadLocation(dir + "/nodir/x", s3).status().code(), absl::StatusCode::kNotFound);
  struct stat st {};
  EXPECT_NE(::stat((dir + "/nodir").c_str(), &st), 0);
  EXPECT_EQ(ReadLocation(dir + "/r", s3).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadLocation("s3://bucket/prefix/", s3).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zephon::checkpoint
