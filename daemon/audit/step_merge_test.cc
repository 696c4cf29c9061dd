#include "daemon/audit/step_merge.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "common/temp_dir_testing.h"
#include "daemon/audit/audit_log.h"
#include "gtest/gtest.h"

namespace zephon::audit {
namespace {

proto::AuditRecord Batch(uint32_t lane, uint64_t j, uint64_t doc) {
  proto::AuditRecord r;
  r.set_canonical_replicas(2);
  r.set_spec_hash("0123456789abcdef");
  r.set_lane(lane);
  r.set_lane_batch_index(j);
  r.set_flush_group_chunk(2 * j);  // where the batch started, carried into the merge
  r.set_records_into_group(lane);
  r.set_token_sha256(std::string(32, static_cast<char>(doc)));
  for (uint64_t v : {uint64_t{0}, uint64_t{0}, doc}) r.add_sample_ids(v);
  return r;
}

// Appends lane rounds [from, to) of both lanes (lane 1's round `skip` left out) to a new
// log file of `dir`; lane 1 is written first when `reversed`.
void Write(const std::string& dir, uint64_t from, uint64_t to, uint64_t skip = UINT64_MAX,
           bool reversed = false, uint64_t changed = UINT64_MAX) {
  auto log = AuditLog::Open(dir, "i");
  ASSERT_TRUE(log.ok()) << log.status();
  for (uint64_t j = from; j < to; ++j) {
    for (uint32_t k = 0; k < 2; ++k) {
      const uint32_t lane = reversed ? 1 - k : k;
      if (lane == 1 && j == skip) continue;
      ASSERT_TRUE((*log)->Append(Batch(lane, j, 10 * j + lane + (j == changed ? 5 : 0))).ok());
    }
  }
}

TEST(StepMergeTest, MergesCompleteLaneRoundsInOrderAndContinuesLater) {
  const std::string dir = testing::MakeTempDir("steps");
  Write(dir, 0, 10, /*skip=*/7);
  auto merged = MergeSteps(dir, 10);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(*merged, 7u);  // round 7 lacks lane 1: the merge stops there
  uint32_t c = 0;
  auto rounds = ReadMergedSteps(dir, &c);
  ASSERT_TRUE(rounds.ok()) << rounds.status();
  EXPECT_EQ(c, 2u);
  ASSERT_EQ(rounds->size(), 7u);
  for (uint64_t j = 0; j < 7; ++j) {
    EXPECT_EQ((*rounds)[j].lane_round, j);
    ASSERT_EQ((*rounds)[j].starts.size(), 2u);
  }
  // One lane round by itself: one read.
  std::string hash;
  auto round5 = ReadMergedRound(dir, 5, &hash);
  ASSERT_TRUE(round5.ok()) << round5.status();
  EXPECT_EQ(hash, "0123456789abcdef");
  ASSERT_TRUE(round5->has_value());
  EXPECT_EQ((*round5)->sha256, (*rounds)[5].sha256);
  EXPECT_EQ((*round5)->starts, (*rounds)[5].starts);
  EXPECT_EQ((*round5)->starts,
            (std::vector<std::pair<uint64_t, uint64_t>>{{10, 0}, {10, 1}}));
  auto beyond = ReadMergedRound(dir, 7);
  ASSERT_TRUE(beyond.ok());
  EXPECT_FALSE(beyond->has_value());
  // The missing batch arrives (another instance's file); a later checkpoint merges on,
  // only up to its bound.
  {
    auto log = AuditLog::Open(dir, "late");
    ASSERT_TRUE(log.ok());
    ASSERT_TRUE((*log)->Append(Batch(1, 7, 71)).ok());
  }
  merged = MergeSteps(dir, 9);
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(*merged, 9u);
  auto again = ReadMergedSteps(dir);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 9u);
  for (uint64_t j = 0; j < 7; ++j) EXPECT_EQ((*again)[j].sha256, (*rounds)[j].sha256);
}

TEST(StepMergeTest, TheDigestIsTheRoundsContentNotTheLogsOrder) {
  const std::string a = testing::MakeTempDir("steps-a");
  const std::string b = testing::MakeTempDir("steps-b");
  const std::string c = testing::MakeTempDir("steps-c");
  Write(a, 0, 6);
  Write(b, 3, 6, UINT64_MAX, /*reversed=*/true);
  Write(b, 0, 3, UINT64_MAX, /*reversed=*/true);
  Write(c, 0, 6, UINT64_MAX, false, /*changed=*/4);
  for (const std::string& dir : {a, b, c}) ASSERT_TRUE(MergeSteps(dir, 6).ok());
  auto ra = ReadMergedSteps(a), rb = ReadMergedSteps(b), rc = ReadMergedSteps(c);
  ASSERT_TRUE(ra.ok() && rb.ok() && rc.ok());
  ASSERT_EQ(ra->size(), 6u);
  for (uint64_t j = 0; j < 6; ++j) {
    EXPECT_EQ((*ra)[j].sha256, (*rb)[j].sha256) << j;
    EXPECT_EQ((*ra)[j].sha256 == (*rc)[j].sha256, j != 4) << j;
  }
}

TEST(StepMergeTest, ATornLastEntryIsCutAndRewritten) {
  const std::string dir = testing::MakeTempDir("steps-torn");
  Write(dir, 0, 5);
  ASSERT_TRUE(MergeSteps(dir, 5).ok());
  const std::string path = dir + "/" + kStepsFile;
  const uint64_t size = std::filesystem::file_size(path);
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(size - 5)), 0);
  auto rounds = ReadMergedSteps(dir);
  ASSERT_TRUE(rounds.ok());
  EXPECT_EQ(rounds->size(), 4u);
  ASSERT_TRUE(MergeSteps(dir, 5).ok());
  EXPECT_EQ(std::filesystem::file_size(path), size);
  EXPECT_EQ(ReadMergedSteps(dir)->size(), 5u);
}

TEST(StepMergeTest, AFileCutBeforeItsHeaderHoldsNothingAndIsRewritten) {
  const std::string dir = testing::MakeTempDir("steps-short");
  Write(dir, 0, 3);
  for (const char* content : {"", "ZSTE"}) {
    {
      std::FILE* f = std::fopen((dir + "/" + kStepsFile).c_str(), "wb");
      std::fputs(content, f);
      std::fclose(f);
    }
    auto rounds = ReadMergedSteps(dir);
    ASSERT_TRUE(rounds.ok()) << rounds.status();
    EXPECT_TRUE(rounds->empty());
    ASSERT_TRUE(MergeSteps(dir, 3).ok());
    EXPECT_EQ(ReadMergedSteps(dir)->size(), 3u);
  }
  {
    std::FILE* f = std::fopen((dir + "/" + kStepsFile).c_str(), "wb");
    std::fputs("NOTSTEPS-and-more", f);
    std::fclose(f);
  }
  EXPECT_EQ(ReadMergedSteps(dir).status().code(), absl::StatusCode::kDataLoss);
}

TEST(StepMergeTest, TheMergerRunsQueuedMergesOnItsThread) {
  const std::string dir = testing::MakeTempDir("steps-thread");
  Write(dir, 0, 4);
  StepMerger merger;
  merger.Enqueue(dir, 2);
  merger.Enqueue(dir, 4);  // raises a queued bound, or runs after
  merger.Drain();
  EXPECT_EQ(ReadMergedSteps(dir)->size(), 4u);
  // A directory without logs: logged, nothing written, the merger goes on.
  const std::string empty = testing::MakeTempDir("steps-empty");
  merger.Enqueue(empty, 3);
  merger.Drain();
  EXPECT_FALSE(std::filesystem::exists(empty + "/" + kStepsFile));
}

}  // namespace
}  // namespace zephon::audit
