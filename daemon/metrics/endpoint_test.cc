#include "daemon/metrics/endpoint.h"

#include <string>

#include "gtest/gtest.h"

namespace zephon::metrics {
namespace {

class RouteEndpointTest : public ::testing::Test {
 protected:
  HttpResponse Get(const std::string& target, int64_t now_ms) {
    return RouteEndpoint(
        target, [this] { ++status_calls_; return proto::StatusReply(); }, counters_, health_,
        now_ms);
  }
  DaemonCounters counters_;
  Health health_;
  int status_calls_ = 0;
};

TEST_F(RouteEndpointTest, HealthzFollowsTheMainLoopTick) {
  EXPECT_EQ(Get("/healthz", 1000).status, 503);  // never ticked
  health_.loop_tick_ms = 1000;
  EXPECT_EQ(Get("/healthz", 1000 + kLoopStaleMs - 1).status, 200);
  EXPECT_EQ(Get("/healthz", 1000 + kLoopStaleMs).status, 503);
  EXPECT_EQ(Get("/healthz", 1000 + kLoopStaleMs).body, "main loop not running\n");
}

TEST_F(RouteEndpointTest, ReadyzFollowsTheReadyFlagIgnoringTheQuery) {
  EXPECT_EQ(Get("/readyz", 0).status, 503);
  health_.ready = true;
  EXPECT_EQ(Get("/readyz?verbose=1", 0).status, 200);
  EXPECT_EQ(status_calls_, 0);  // only /metrics asks the registry
}

TEST_F(RouteEndpointTest, MetricsRendersTheCountersGiven) {
  counters_.CountAttach(true);
  counters_.CountAttach(true);
  const HttpResponse out = Get("/metrics", 0);
  EXPECT_EQ(out.status, 200);
  EXPECT_EQ(out.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_EQ(status_calls_, 1);
  EXPECT_NE(out.body.find("# TYPE"), std::string::npos);
  EXPECT_NE(out.body.find(" 2\n"), std::string::npos) << out.body;
}

TEST_F(RouteEndpointTest, UnknownPathIs404NamingTheRoutes) {
  const HttpResponse out = Get("/nope", 0);
  EXPECT_EQ(out.status, 404);
  EXPECT_NE(out.body.find("/metrics, /healthz or /readyz"), std::string::npos);
}

}  // namespace
}  // namespace zephon::metrics
