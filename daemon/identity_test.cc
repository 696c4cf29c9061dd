#include "daemon/identity.h"

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
  auto id = ResolveIdentity(Rank(4, 3));
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->dp_degree, 4u);
  EXPECT_EQ(id->dp_group_id, 3u);
  EXPECT_TRUE(id->warnings.empty());
}

TEST(ResolveIdentity, SingleRankNeedsNoRunId) {
  proto::RankOptions o;
  auto id = ResolveIdentity(o);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->world_size, 1u);
}

TEST(ResolveIdentity, PeersPerGroupBoundLocalPeers) {
  auto o = Rank(8, 3);
  o.set_dp_degree(4);
  o.set_dp_group_id(1);
  auto id = ResolveIdentity(o);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->local_peers, 2u);
  o.set_local_peers(7);
  EXPECT_EQ(ResolveIdentity(o)->local_peers, 2u);
  o.set_local_peers(1);
  EXPECT_EQ(ResolveIdentity(o)->local_peers, 1u);
}

struct BadCase {
  const char* what;
  proto::RankOptions options;
  const char* must_mention;
};

TEST(ResolveIdentity, EveryViolationNamesTheOptionAndValues) {
  std::vector<BadCase> cases;
  {
    proto::RankOptions o;
    o.set_world_size(0);
    cases.push_back({"world_size 0", o, "world_size=0"});
  }
  cases.push_back({"rank out of range", Rank(4, 4), "global_rank=4"});
  {
    auto o = Rank(4, 0);
    o.set_dp_degree(8);
    cases.push_back({"dp > world", o, "dp_degree=8"});
  }
  {
    auto o = Rank(6, 0);
    o.set_dp_degree(4);
    cases.push_back({"not divisible", o, "not divisible by dp_degree=4"});
  }
  {
    auto o = Rank(4, 0);
    o.set_dp_degree(2);
    o.set_dp_group_id(2);
    cases.push_back({"group out of range", o, "dp_group_id=2"});
  }
  {
    auto o = Rank(2, 0);
    o.clear_aggregate_dir();
    cases.push_back({"no aggregate_dir", o, "aggregate_dir is required"});
  }
  {
    auto o = Rank(2, 0);
    o.clear_run_id();
    cases.push_back({"no run_id", o, "run_id is required"});
  }
  {
    auto o = Rank(2, 0);
    o.set_run_id("bad/id");
    cases.push_back({"bad run_id", o, "run_id='bad/id'"});
  }
  {
    auto o = Rank(2, 0);
    o.set_aggregate_dir("ckpt/agg");
    cases.push_back({"relative aggregate_dir", o, "aggregate_dir='ckpt/agg' is a relative path"});
  }
  cases.push_back({"world over the bound", Rank(kMaxWorldSize + 1, 0),
                   "world_size=131073 is invalid: expected 1 <= world_size <= 131072"});
  cases.push_back({"world over 32 bits", Rank((int64_t{1} << 32) + 2, 0),
                   "world_size=4294967298 is invalid"});
  for (const auto& c : cases) {
    auto id = ResolveIdentity(c.options);
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
  auto id = ResolveIdentity(o);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->world_size, static_cast<uint32_t>(kMaxWorldSize));
}

TEST(ResolveIdentity, AbsoluteAndUrlAggregateDirsPass) {
  for (const char* dir : {"/shared/agg", "file:///shared/agg", "s3://bucket/agg"}) {
    auto o = Rank(2, 0);
    o.set_aggregate_dir(dir);
    EXPECT_TRUE(ResolveIdentity(o).ok()) << dir;
  }
}

}  // namespace
}  // namespace zephon::daemon
