#include "daemon/checkpoint/mid_window.h"

#include <cstdint>
#include <initializer_list>
#include <string>

#include "gtest/gtest.h"

namespace zephon::checkpoint {
namespace {

proto::CheckpointState StateWithLanes(std::initializer_list<uint64_t> counts) {
  proto::CheckpointState state;
  state.set_run_id("r1");
  state.set_round(2);
  state.set_canonical_replicas(static_cast<uint32_t>(counts.size()));
  uint32_t lane = 0;
  uint64_t total = 0;
  for (uint64_t n : counts) {
    proto::LaneProgress* p = state.add_lanes();
    p->set_lane(lane++);
    p->set_next_batch_index(n);
    total += n;
  }
  state.set_total_batches(total);
  return state;
}

TEST(MidWindowWarning, NoneAtAWholeNumberOfLaneRounds) {
  EXPECT_FALSE(MidWindowWarning(StateWithLanes({3, 3, 3, 3})).has_value());
  EXPECT_FALSE(MidWindowWarning(StateWithLanes({0, 0})).has_value());
  EXPECT_FALSE(MidWindowWarning(proto::CheckpointState()).has_value());
}

TEST(MidWindowWarning, NamesTheStepTheRangeAndC) {
  // C=4, deliveries on lanes 0,1,2,3,0: global batch 5.
  const std::optional<std::string> warning = MidWindowWarning(StateWithLanes({2, 1, 1, 1}));
  ASSERT_TRUE(warning.has_value());
  EXPECT_NE(warning->find("round 2 of run r1"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("mid-window"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("global batch 5"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("C=4"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("1..2"), std::string::npos) << *warning;
}

}  // namespace
}  // namespace zephon::checkpoint
