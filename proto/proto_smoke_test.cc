#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include "absl/status/statusor.h"
#include "proto/zephon.grpc.pb.h"

TEST(ProtoSmoke, SpecRoundTrips) {
  zephon::proto::PipelineSpec spec;
  spec.set_canonical_replicas(8);
  std::string bytes;
  ASSERT_TRUE(spec.SerializeToString(&bytes));
  zephon::proto::PipelineSpec back;
  ASSERT_TRUE(back.ParseFromString(bytes));
  EXPECT_EQ(back.canonical_replicas(), 8u);
  absl::StatusOr<int> s = absl::InvalidArgumentError("x");
  EXPECT_FALSE(s.ok());
  spdlog::info("smoke");
}
