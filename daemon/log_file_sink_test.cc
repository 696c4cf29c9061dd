#include "daemon/log_file_sink.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <memory>
#include <string>

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "common/temp_dir_testing.h"

namespace zephon::daemon {
namespace {

std::string ReadAll(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

TEST(LogFileSinkTest, AppendsRecordsToAFileItCreates0600) {
  const std::string dir = testing::MakeTempDir("log_sink");
  const std::string path = dir + "/logs/zephond.log";  // the directory is created too
  absl::StatusOr<std::shared_ptr<LogFileSink>> sink = LogFileSink::Open(path);
  ASSERT_TRUE(sink.ok()) << sink.status();
  spdlog::logger logger("test", *sink);
  logger.info("ring {} created", "/zephon.1");
  logger.warn("rank {} lags", 3);
  const std::string text = ReadAll(path);
  EXPECT_NE(text.find("ring /zephon.1 created"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 3 lags"), std::string::npos) << text;
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(LogFileSinkTest, RefusesASymlinkAndLeavesItsTargetUnchanged) {
  const std::string dir = testing::MakeTempDir("log_sink");
  const std::string target = dir + "/shadow";
  { std::ofstream(target) << "root-only\n"; }
  ASSERT_EQ(symlink(target.c_str(), (dir + "/zephond.log").c_str()), 0);
  absl::StatusOr<std::shared_ptr<LogFileSink>> sink = LogFileSink::Open(dir + "/zephond.log");
  ASSERT_TRUE(absl::IsFailedPrecondition(sink.status())) << sink.status();
  EXPECT_NE(sink.status().message().find("symlink"), std::string::npos) << sink.status();
  EXPECT_EQ(ReadAll(target), "root-only\n");
}

TEST(LogFileSinkTest, RefusesALogInAWorldWritableNonStickyDirectory) {
  const std::string dir = testing::MakeTempDir("log_sink");
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  absl::StatusOr<std::shared_ptr<LogFileSink>> sink = LogFileSink::Open(dir + "/zephond.log");
  ASSERT_TRUE(absl::IsFailedPrecondition(sink.status())) << sink.status();
  EXPECT_NE(sink.status().message().find(dir), std::string::npos) << sink.status();
}

// systemd's UMask=0007 (and a login shell's 0002) would leave std::filesystem's
// directories group-writable, which the trust check then refuses: the sink's own
// directories are made exactly 0700 whatever the umask.
class LogFileSinkUmaskTest : public ::testing::TestWithParam<mode_t> {};

TEST_P(LogFileSinkUmaskTest, CreatesMissingDirectories0700WhateverTheUmask) {
  const std::string dir = testing::MakeTempDir("log_sink");
  const std::string path = dir + "/var/log/zephond/zephond.log";
  const mode_t old_umask = umask(GetParam());
  absl::StatusOr<std::shared_ptr<LogFileSink>> sink = LogFileSink::Open(path);
  umask(old_umask);
  ASSERT_TRUE(sink.ok()) << sink.status();
  for (const std::string& d : {dir + "/var", dir + "/var/log", dir + "/var/log/zephond"}) {
    struct stat st;
    ASSERT_EQ(stat(d.c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_mode & 07777, 0700u) << d;
  }
}

INSTANTIATE_TEST_SUITE_P(Umasks, LogFileSinkUmaskTest, ::testing::Values(0007, 0002, 0077));

}  // namespace
}  // namespace zephon::daemon
