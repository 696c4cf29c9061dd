#include "daemon/audit/audit_log.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "common/temp_dir_testing.h"
#include "gtest/gtest.h"

namespace zephon::audit {
namespace {

proto::AuditRecord Record(uint64_t seq) {
  proto::AuditRecord r;
  r.set_run_id("run");
  r.set_instance_id("run/dp2/g1#3");
  r.set_lane(static_cast<uint32_t>(seq % 4));
  r.set_lane_batch_index(seq / 4);
  r.set_seq(seq);
  r.set_token_sha256(std::string(32, static_cast<char>(seq)));
  for (uint64_t i = 0; i < 3 * (1 + seq % 5); ++i) r.add_sample_ids(seq * 100 + i);
  return r;
}

std::vector<std::string> Files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(AuditLogTest, RecordsComeBackInOrderAcrossRotatedFiles) {
  const std::string tmp = testing::MakeTempDir("audit");
  const std::string dir = tmp + "/a/b";  // created
  {
    auto log = AuditLog::Open(dir, "run/dp2/g1#3", /*rotate_bytes=*/4096);
    ASSERT_TRUE(log.ok()) << log.status();
    for (uint64_t s = 0; s < 200; ++s) ASSERT_TRUE((*log)->Append(Record(s)).ok());
  }
  const std::vector<std::string> files = Files(dir);
  ASSERT_GT(files.size(), 2u);  // rotated
  EXPECT_EQ(files[0], "run_dp2_g1_3.000000.zaudit");  // the stem made a file name
  auto records = ReadAuditDir(dir);
  ASSERT_TRUE(records.ok()) << records.status();
  ASSERT_EQ(records->size(), 200u);
  for (uint64_t s = 0; s < 200; ++s) {
    EXPECT_EQ((*records)[s].SerializeAsString(), Record(s).SerializeAsString()) << s;
  }
}

TEST(AuditLogTest, AReopenedLogStartsANewFileAndKeepsTheOldOnes) {
  const std::string tmp = testing::MakeTempDir("audit");
  for (int run = 0; run < 2; ++run) {
    auto log = AuditLog::Open(tmp, "x");
    ASSERT_TRUE(log.ok()) << log.status();
    ASSERT_TRUE((*log)->Append(Record(run)).ok());
  }
  EXPECT_EQ(Files(tmp), (std::vector<std::string>{"x.000000.zaudit", "x.000001.zaudit"}));
  auto records = ReadAuditDir(tmp);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_EQ(records->size(), 2u);
}

TEST(AuditLogTest, ATornLastRecordIsSkippedAndADamagedMiddleOneIsAnError) {
  const std::string tmp = testing::MakeTempDir("audit");
  std::string path;
  {
    auto log = AuditLog::Open(tmp, "t");
    ASSERT_TRUE(log.ok()) << log.status();
    for (uint64_t s = 0; s < 5; ++s) ASSERT_TRUE((*log)->Append(Record(s)).ok());
    path = (*log)->path();
  }
  const uint64_t size = std::filesystem::file_size(path);
  // A crash in the middle of the last append.
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(size - 7)), 0);
  bool torn = false;
  auto records = ReadAuditFile(path, &torn);
  ASSERT_TRUE(records.ok()) << records.status();
  EXPECT_TRUE(torn);
  EXPECT_EQ(records->size(), 4u);
  // A flipped byte inside the second record, with records after it: not a crash.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8 + 12 + Record(0).ByteSizeLong() + 12 + 3);
    f.put('\x5a');
  }
  auto damaged = ReadAuditFile(path);
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss) << damaged.status();
  EXPECT_NE(damaged.status().message().find(path), std::string::npos);
}

TEST(AuditLogTest, ReadingWhatIsNotAnAuditLogSaysSo) {
  const std::string tmp = testing::MakeTempDir("audit");
  EXPECT_EQ(ReadAuditDir(tmp).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadAuditDir(tmp + "/missing").status().code(), absl::StatusCode::kNotFound);
  std::ofstream(tmp + "/junk.zaudit") << "hello, world";
  EXPECT_EQ(ReadAuditDir(tmp).status().code(), absl::StatusCode::kDataLoss);
}

TEST(AuditLogTest, AnUnwritableDirectoryIsAClearError) {
  if (geteuid() == 0) GTEST_SKIP() << "root writes anywhere";
  const std::string tmp = testing::MakeTempDir("audit");
  ASSERT_EQ(chmod(tmp.c_str(), 0500), 0);
  auto log = AuditLog::Open(tmp + "/sub", "x");
  EXPECT_FALSE(log.ok());
  chmod(tmp.c_str(), 0700);
}

}  // namespace
}  // namespace zephon::audit
