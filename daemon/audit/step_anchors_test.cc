#include "daemon/audit/step_anchors.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/temp_dir_testing.h"
#include "gtest/gtest.h"

namespace zephon::audit {
namespace {

constexpr uint64_t kK = 2;   // flush_every_k_chunks
constexpr uint64_t kM = 4;   // microbatch_size
constexpr uint64_t kEvery = 100;

AnchorOrigin Origin(const std::string& writer, const std::string& hash = "00ab") {
  return AnchorOrigin{"run", writer, hash, 8};
}

// Group g of every lane holds 30 records: batch b starts in group (b*M)/30.
void NoteBatches(StepAnchorWriter* w, uint32_t lane, uint64_t from, uint64_t to) {
  for (uint64_t b = from; b < to; ++b) {
    const uint64_t g = b * kM / 30;
    ASSERT_TRUE(w->Note(lane, b, g * kK, b * kM - g * 30).ok());
  }
}

// Group starts (records) anchored for `lane` in `dir`.
std::vector<uint64_t> Anchored(const std::string& dir, uint32_t lane) {
  std::vector<uint64_t> out;
  EXPECT_TRUE(ForEachAuditRecord(dir, [&](proto::AuditRecord r) {
                if (r.lane() == lane) out.push_back(r.lane_batch_index() * kM - r.records_into_group());
              }).ok());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(StepAnchorsTest, DirIsKeyedBySpecHash) {
  EXPECT_EQ(StepAnchorDir("/c", "0123abcd"), "/c/anchors/0123abcd");
}

TEST(StepAnchorsTest, OneAnchorPerWindowPerLaneAndNothingBeforeTheFirst) {
  const std::string dir = testing::MakeTempDir("anchors") + "/anchors/00ab";
  StepAnchorWriter w(dir, Origin("i0"), kK, kM, kEvery);
  EXPECT_FALSE(std::filesystem::exists(dir));  // nothing created before a note
  NoteBatches(&w, 0, 0, 100);   // records 0..400: groups start at 0, 30, ..., 390
  NoteBatches(&w, 3, 50, 60);   // a lane that started late (a resume)
  // Lane 0: 0, then the first group start more than 100 records on: 120, 240, 360.
  EXPECT_EQ(Anchored(dir, 0), (std::vector<uint64_t>{0, 120, 240, 360}));
  // Lane 3 starts at record 200 in group 6 (record 180).
  EXPECT_EQ(Anchored(dir, 3), (std::vector<uint64_t>{180}));
  EXPECT_EQ(w.written(), 5u);
}

TEST(StepAnchorsTest, ASecondWriterOfTheSpecAddsOnlyWhatIsNew) {
  const std::string dir = testing::MakeTempDir("anchors");
  {
    StepAnchorWriter first(dir, Origin("i0"), kK, kM, kEvery);
    NoteBatches(&first, 0, 0, 50);  // records up to 200
  }
  StepAnchorWriter second(dir, Origin("i1"), kK, kM, kEvery);
  NoteBatches(&second, 0, 0, 100);  // the same start, then further
  EXPECT_EQ(Anchored(dir, 0), (std::vector<uint64_t>{0, 120, 240, 360}));
  EXPECT_EQ(second.written(), 2u);  // 240 and 360
}

TEST(StepAnchorsTest, AnotherSpecsAnchorsInTheDirectoryAreNotCounted) {
  const std::string dir = testing::MakeTempDir("anchors");
  {
    StepAnchorWriter other(dir, Origin("i0", "ffff"), kK, kM, kEvery);
    NoteBatches(&other, 0, 0, 50);
  }
  StepAnchorWriter mine(dir, Origin("i1"), kK, kM, kEvery);
  NoteBatches(&mine, 0, 0, 50);
  EXPECT_EQ(mine.written(), 2u);  // 0 and 120, despite the other spec's
}

TEST(StepAnchorsTest, APositionNoBatchCanHaveIsRefused) {
  StepAnchorWriter w(testing::MakeTempDir("anchors"), Origin("i0"), kK, kM, kEvery);
  EXPECT_TRUE(absl::IsInvalidArgument(w.Note(0, 1, 3, 0)));  // chunk off a group start
  EXPECT_TRUE(absl::IsInvalidArgument(w.Note(0, 1, 2, 5)));  // 5 records into it > 4 before
}

TEST(StepAnchorsTest, AnUnwritableDirectoryIsAnErrorNamingIt) {
  const std::string tmp = testing::MakeTempDir("anchors");
  const std::string file = tmp + "/file";
  { std::ofstream(file) << "x"; }
  StepAnchorWriter w(file + "/anchors", Origin("i0"), kK, kM, kEvery);
  absl::Status s = w.Note(0, 0, 0, 0);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(file), std::string::npos) << s;
}

}  // namespace
}  // namespace zephon::audit
