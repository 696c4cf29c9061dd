#include "daemon/checkpoint/refusal_log.h"

#include <string>

#include "common/fake_env.h"
#include "gtest/gtest.h"

namespace zephon::checkpoint {
namespace {

TEST(RefusalLogTest, CallerTextCannotForgeLinesOrGrowWithoutBound) {
  const std::string forged = "node-b\n[2026-12-01] [peer] [info] all good";
  const std::string shown = RefusalLog::Printable(forged);
  EXPECT_EQ(shown.find('\n'), std::string::npos);
  EXPECT_NE(shown.find("\\n"), std::string::npos);
  const std::string huge = RefusalLog::Printable(std::string(1 << 20, 'x'));
  EXPECT_LE(huge.size(), RefusalLog::kMaxPrintableBytes + 3);
  EXPECT_EQ(huge.substr(huge.size() - 3), "...");
  EXPECT_EQ(RefusalLog::Printable("node-a"), "node-a");
}

TEST(RefusalLogTest, AFloodLogsOneLinePerInterval) {
  RefusalLog log(absl::Hours(1));
  int logged = 0;
  for (int i = 0; i < 1000; ++i) logged += log.Warn("a call", "ipv4:10.0.0.9:1234", "bad") ? 1 : 0;
  EXPECT_EQ(logged, 1);
  RefusalLog every(absl::ZeroDuration());
  EXPECT_TRUE(every.Warn("a call", "p", "d"));
  EXPECT_TRUE(every.Warn("a call", "p", "d"));
}

TEST(RefusalLogTest, TheIntervalIsDecidedByTheEnvClock) {
  FakeEnv env;
  RefusalLog log(absl::Seconds(10), &env);
  EXPECT_TRUE(log.Warn("a call", "p", "first"));
  env.Advance(absl::Seconds(9));
  EXPECT_FALSE(log.Warn("a call", "p", "within the interval"));
  env.Advance(absl::Seconds(1));
  EXPECT_TRUE(log.Warn("a call", "p", "the interval has passed"));
  EXPECT_FALSE(log.Warn("a call", "p", "again within it"));
}

}  // namespace
}  // namespace zephon::checkpoint
