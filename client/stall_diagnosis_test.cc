#include "client/stall_diagnosis.h"

#include <gtest/gtest.h>

namespace zephon::client {
namespace {

proto::InstanceStatus Instance(uint32_t slots) {
  proto::InstanceStatus s;
  s.set_instance_id("r1/dp1/g0/abc");
  s.set_ring_slots(slots);
  s.set_produced(12);
  return s;
}

void AddReader(proto::InstanceStatus* s, uint32_t index, uint32_t rank, uint64_t lag,
               const std::string& state = "attached") {
  proto::ReaderStatus* r = s->add_readers();
  r->set_reader_index(index);
  r->set_global_rank(rank);
  r->set_lag(lag);
  r->set_state(state);
  r->set_pid(4000 + rank);
}

TEST(DescribeStall, NamesThePeerThatFillsTheRing) {
  auto s = Instance(4);
  AddReader(&s, 0, 0, 0);  // this reader
  AddReader(&s, 1, 3, 4);
  AddReader(&s, 2, 5, 1);
  const std::string text = DescribeStall(s, 0);
  EXPECT_NE(text.find("global_rank 3 (pid 4003, reader 1) has not released 4 batches"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("global_rank 5"), std::string::npos) << text;
  EXPECT_NE(text.find("is full (4 slots)"), std::string::npos) << text;
}

TEST(DescribeStall, NamesAReservedSlotOfAPeerThatNeverAttached) {
  auto s = Instance(2);
  AddReader(&s, 0, 0, 0);
  AddReader(&s, 1, 0, 2, "reserved");
  EXPECT_NE(DescribeStall(s, 0).find("reader slot 1, reserved for a DP-group peer"),
            std::string::npos);
}

TEST(DescribeStall, WithoutALaggingPeerBlamesTheProducer) {
  auto s = Instance(4);
  AddReader(&s, 0, 0, 0);
  AddReader(&s, 1, 1, 1);
  AddReader(&s, 2, 2, 9, "dead");  // no longer gates
  const std::string text = DescribeStall(s, 0);
  EXPECT_NE(text.find("no DP-group peer holds the ring"), std::string::npos) << text;
  EXPECT_NE(text.find("slowest peer: global_rank 1, lag 1 of 4 slots"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace zephon::client
