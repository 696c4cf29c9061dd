#include "daemon/storage/s3_counters.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

TEST(S3CountersTest, CountsRequestsRetriesAndErrorsPerOperation) {
  S3Counters c;
  EXPECT_TRUE(c.Snapshot().empty());
  c.Count("GET", 1, false);
  c.Count("GET", 3, true);
  c.Count("PUT", 2, false);
  const auto s = c.Snapshot();
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s.at("GET").requests, 2u);
  EXPECT_EQ(s.at("GET").retries, 2u);
  EXPECT_EQ(s.at("GET").errors, 1u);
  EXPECT_EQ(s.at("PUT").requests, 1u);
  EXPECT_EQ(s.at("PUT").retries, 1u);
  EXPECT_EQ(s.at("PUT").errors, 0u);
}

TEST(S3CountersTest, ConcurrentCountsAllLand) {
  S3Counters c;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&c] {
      for (int i = 0; i < 1000; ++i) c.Count("HEAD", 1, i % 10 == 0);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(c.Snapshot().at("HEAD").requests, 4000u);
  EXPECT_EQ(c.Snapshot().at("HEAD").errors, 400u);
}

}  // namespace
}  // namespace zephon::storage
