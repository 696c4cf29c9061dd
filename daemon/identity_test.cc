#include "daemon/identity.h"

#include <optional>

#include <gtest/gtest.h>

#include "common/run_limits.h"

namespace zephon::daemon {
namespace {

proto::RankOptions Rank(int64_t world, int64_t rank) {
  proto::RankOptions o;
  o.set_world_size(world);
  o.set_global_rank(rank);
  if (world > 1) {
    o.set_aggregate_dir("/tmp/agg");
    o.set_run_id("r1");
  }
  return o;
}

TEST(ResolveIdentity, DefaultsFollowTheGuide) {
  auto id = ResolveIdentity(Rank(4, 3), std::nullopt);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->dp_degree, 4u);
  EXPECT_EQ(id->dp_group_id, 3u);
  EXPECT_EQ(id->canonical_replicas, 4u);
  EXPECT_TRUE(id->warnings.empty());
}

TEST(ResolveIdentity, SingleRankNeedsNoRunId) {
  proto::RankOptions o;
  auto id = ResolveIdentity(o, std::nullopt);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->world_size, 1u);
  EXPECT_EQ(id->canonical_replicas, 1u);
}

TEST(ResolveIdentity, PeersPerGroupBoundLocalPeers) {
  auto o = Rank(8, 3);
  o.set_dp_degree(4);
  o.set_dp_group_id(1);
  auto id = ResolveIdentity(o, 8);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->local_peers, 2u);
  o.set_local_peers(7);
  EXPECT_EQ(ResolveIdentity(o, 8)->local_peers, 2u);
  o.set_local_peers(1);
  EXPECT_EQ(ResolveIdentity(o, 8)->local_peers, 1u);
}

struct BadCase {
  const char* what;
  proto::RankOptions options;
  std::optional<int64_t> canonical;
  const char* must_mention;
};

TEST(ResolveIdentity, EveryViolationNamesTheOptionAndValues) {
  std::vector<BadCase> cases;
  {
    proto::RankOptions o;
    o.set_world_size(0);
    cases.push_back({"world_size 0", o, std::nullopt, "world_size=0"});
  }
  cases.push_back({"rank out of range", Rank(4, 4), std::nullopt, "global_rank=4"});
  {
    auto o = Rank(4, 0);
    o.set_dp_degree(8);
    cases.push_back({"dp > world", o, std::nullopt, "dp_degree=8"});
  }
  {
    auto o = Rank(6, 0);
    o.set_dp_degree(4);
    cases.push_back({"not divisible", o, std::nullopt, "not divisible by dp_degree=4"});
  }
  {
    auto o = Rank(4, 0);
    o.set_dp_degree(2);
    o.set_dp_group_id(2);
    cases.push_back({"group out of range", o, std::nullopt, "dp_group_id=2"});
  }
  {
    auto o = Rank(4, 0);
    cases.push_back({"dp > C", o, 2, "exceeds canonical_replicas=2"});
  }
  {
    auto o = Rank(2, 0);
    o.clear_aggregate_dir();
    cases.push_back({"no aggregate_dir", o, std::nullopt, "aggregate_dir is required"});
  }
  {
    auto o = Rank(2, 0);
    o.clear_run_id();
    cases.push_back({"no run_id", o, std::nullopt, "run_id is required"});
  }
  {
    auto o = Rank(2, 0);
    o.set_run_id("bad/id");
    cases.push_back({"bad run_id", o, std::nullopt, "run_id='bad/id'"});
  }
  {
    auto o = Rank(2, 0);
    o.set_aggregate_dir("ckpt/agg");
    cases.push_back({"relative aggregate_dir", o, std::nullopt, "aggregate_dir='ckpt/agg' is a relative path"});
  }
  cases.push_back({"explicit canonical 0", Rank(1, 0), 0,
                   "canonical_replicas=0 is invalid: expected 1 <= canonical_replicas <= 65536"});
  cases.push_back({"canonical over the bound", Rank(1, 0), kMaxCanonicalReplicas + 1,
                   "canonical_replicas=65537 is invalid"});
  // 2^32 + 2 must be refused, never truncated to 2.
  cases.push_back({"canonical over 32 bits", Rank(2, 0), (int64_t{1} << 32) + 2,
                   "canonical_replicas=4294967298 is invalid"});
  cases.push_back({"world over the bound", Rank(kMaxWorldSize + 1, 0), std::nullopt,
                   "world_size=131073 is invalid: expected 1 <= world_size <= 131072"});
  cases.push_back({"world over 32 bits", Rank((int64_t{1} << 32) + 2, 0), std::nullopt,
                   "world_size=4294967298 is invalid"});
  {
    // Unset canonical_replicas defaults to dp_degree, which the lane bound also limits.
    auto o = Rank(kMaxWorldSize, 0);
    cases.push_back({"default canonical over the bound", o, std::nullopt,
                     "dp_degree=131072 exceeds zephond's bound of 65536"});
  }
  for (const auto& c : cases) {
    auto id = ResolveIdentity(c.options, c.canonical);
    ASSERT_FALSE(id.ok()) << c.what;
    EXPECT_EQ(id.status().code(), absl::StatusCode::kInvalidArgument) << c.what;
    EXPECT_NE(id.status().message().find(c.must_mention), std::string::npos)
        << c.what << ": " << id.status().message();
  }
}

TEST(ResolveIdentity, AcceptsTheLargestAllowedRun) {
  auto o = Rank(kMaxWorldSize, kMaxWorldSize - 1);
  o.set_dp_degree(kMaxCanonicalReplicas);
  o.set_dp_group_id(kMaxCanonicalReplicas - 1);
  auto id = ResolveIdentity(o, kMaxCanonicalReplicas);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->world_size, static_cast<uint32_t>(kMaxWorldSize));
  EXPECT_EQ(id->canonical_replicas, static_cast<uint32_t>(kMaxCanonicalReplicas));
}

TEST(ResolveIdentity, AbsoluteAndUrlAggregateDirsPass) {
  for (const char* dir : {"/shared/agg", "file:///shared/agg", "s3://bucket/agg"}) {
    auto o = Rank(2, 0);
    o.set_aggregate_dir(dir);
    EXPECT_TRUE(ResolveIdentity(o, std::nullopt).ok()) << dir;
  }
}

TEST(ResolveIdentity, UnevenLanesWarn) {
  auto o = Rank(3, 0);
  auto id = ResolveIdentity(o, 8);
  ASSERT_TRUE(id.ok()) << id.status();
  ASSERT_EQ(id->warnings.size(), 1u);
  EXPECT_NE(id->warnings[0].find("canonical_replicas=8 is not divisible by dp_degree=3"),
            std::string::npos);
}

}  // namespace
}  // namespace zephon::daemon
