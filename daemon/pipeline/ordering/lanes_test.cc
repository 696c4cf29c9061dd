#include "daemon/pipeline/ordering/lanes.h"

#include "absl/strings/str_cat.h"

#include <gtest/gtest.h>

#include <set>

namespace zephon::pipeline {
namespace {

TEST(LanesTest, EveryBlockGivesEachLaneExactlyOneChunk) {
  for (LaneRouting r : {proto::PipelineSpec::MODULO, proto::PipelineSpec::PERMUTE}) {
    for (uint32_t c : {1u, 2u, 3u, 4u, 6u, 8u, 13u}) {
      for (uint64_t block = 0; block < 50; ++block) {
        std::set<uint32_t> lanes;
        for (uint64_t g = block * c; g < (block + 1) * c; ++g) {
          lanes.insert(LaneOfChunk(g, c, r, 77));
        }
        ASSERT_EQ(lanes.size(), c);
        ASSERT_LT(*lanes.rbegin(), c);
      }
    }
  }
}

TEST(LanesTest, GlobalChunkOfLaneInvertsLaneOfChunk) {
  for (LaneRouting r : {proto::PipelineSpec::MODULO, proto::PipelineSpec::PERMUTE}) {
    for (uint32_t c : {1u, 4u, 6u}) {
      for (uint64_t g = 0; g < 200; ++g) {
        const uint32_t lane = LaneOfChunk(g, c, r, 5);
        EXPECT_EQ(GlobalChunkOfLane(lane, g / c, c, r, 5), g);
      }
    }
  }
}

TEST(LanesTest, ModuloIsGModC) {
  EXPECT_EQ(LaneOfChunk(13, 4, proto::PipelineSpec::MODULO, 9), 1u);
  EXPECT_EQ(GlobalChunkOfLane(3, 2, 4, proto::PipelineSpec::MODULO, 9), 11u);
}

TEST(LanesTest, PermuteIsNotAlwaysModulo) {
  int differ = 0;
  for (uint64_t g = 0; g < 400; ++g) {
    differ += LaneOfChunk(g, 8, proto::PipelineSpec::PERMUTE, 1) != g % 8;
  }
  EXPECT_GT(differ, 100);
}

TEST(OwnedLanesTest, ContiguousUnevenSplitGivesFirstGroupsOneMore) {
  EXPECT_EQ(OwnedLanes(8, 3, 0, proto::PipelineSpec::CONTIGUOUS).value(), (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(OwnedLanes(8, 3, 1, proto::PipelineSpec::CONTIGUOUS).value(), (std::vector<uint32_t>{3, 4, 5}));
  EXPECT_EQ(OwnedLanes(8, 3, 2, proto::PipelineSpec::CONTIGUOUS).value(), (std::vector<uint32_t>{6, 7}));
  EXPECT_EQ(OwnedLanes(8, 4, 3, proto::PipelineSpec::CONTIGUOUS).value(), (std::vector<uint32_t>{6, 7}));
  EXPECT_EQ(OwnedLanes(4, 1, 0, proto::PipelineSpec::CONTIGUOUS).value(),
            (std::vector<uint32_t>{0, 1, 2, 3}));
}

TEST(OwnedLanesTest, InterleavedTakesLanesCongruentToTheGroup) {
  EXPECT_EQ(OwnedLanes(8, 3, 0, proto::PipelineSpec::INTERLEAVED).value(), (std::vector<uint32_t>{0, 3, 6}));
  EXPECT_EQ(OwnedLanes(8, 3, 2, proto::PipelineSpec::INTERLEAVED).value(), (std::vector<uint32_t>{2, 5}));
  EXPECT_EQ(OwnedLanes(6, 2, 1, proto::PipelineSpec::INTERLEAVED).value(), (std::vector<uint32_t>{1, 3, 5}));
}

TEST(OwnedLanesTest, GroupsPartitionTheLanes) {
  for (MappingStrategy m : {proto::PipelineSpec::CONTIGUOUS, proto::PipelineSpec::INTERLEAVED}) {
    for (uint32_t c = 1; c <= 12; ++c) {
      for (uint32_t d = 1; d <= c; ++d) {
        std::multiset<uint32_t> all;
        for (uint32_t g = 0; g < d; ++g) {
          const std::vector<uint32_t> lanes = OwnedLanes(c, d, g, m).value();
          all.insert(lanes.begin(), lanes.end());
        }
        ASSERT_EQ(all.size(), c);
        ASSERT_EQ(std::set<uint32_t>(all.begin(), all.end()).size(), c);
      }
    }
  }
}

TEST(OwnedLanesTest, RejectsBadTopologyNamingTheValues) {
  auto s = OwnedLanes(4, 5, 0, proto::PipelineSpec::CONTIGUOUS);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("dp_degree=5 exceeds canonical_replicas=4"),
            std::string::npos);
  EXPECT_FALSE(OwnedLanes(4, 2, 2, proto::PipelineSpec::CONTIGUOUS).ok());
  s = OwnedLanes(4, 0, 0, proto::PipelineSpec::CONTIGUOUS);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("dp_degree=0 is invalid"), std::string::npos);
}

TEST(LanesTest, LaneCountIsCheckedOnTheInt64BeforeNarrowing) {
  EXPECT_TRUE(CheckCanonicalReplicas(1).ok());
  EXPECT_TRUE(CheckCanonicalReplicas(65'536).ok());
  for (int64_t bad : {int64_t{0}, int64_t{-1}, int64_t{65'537}, (int64_t{1} << 32) + 2}) {
    const absl::Status s = CheckCanonicalReplicas(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(absl::StrCat("canonical_replicas=", bad, " is invalid: expected "
                                            "1 <= canonical_replicas <= 65536")),
              std::string::npos)
        << s.message();
  }
}

}  // namespace
}  // namespace zephon::pipeline
