#include "client/zephonctl/top_view.h"

#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace zephon::ctl {
namespace {

proto::StatusReply Node() {
  proto::StatusReply s;
  s.set_pid(4242);
  s.set_uptime_s(3725);
  s.set_process_cpu_s(10);
  proto::InstanceStatus* in = s.add_instances();
  in->set_instance_id("r1/dp0/g0/3f2a9c0d11");
  in->set_run_id("pretrain-7b");
  in->set_dp_group_id(0);
  in->set_dp_degree(2);
  in->set_ring_slots(8);
  in->set_produced(100);
  in->set_released_per_s(41.25);
  in->set_ring_occupancy(6);  // the slowest reader released 94
  for (uint32_t rank : {0u, 1u}) {
    proto::ReaderStatus* r = in->add_readers();
    r->set_global_rank(rank);
    r->set_state("attached");
    r->set_released(rank == 0 ? 98 : 94);
    r->set_lag(rank == 0 ? 2 : 6);
    r->set_waiting(rank == 0);
  }
  proto::LastCheckpointRound* last = s.mutable_checkpoint_rounds()->mutable_last();
  s.mutable_checkpoint_rounds()->set_ok(3);
  s.mutable_checkpoint_rounds()->set_timeout(1);
  last->set_run_id("pretrain-7b");
  last->set_round(4);
  last->set_result("timeout");
  last->set_finished_unix_s(1000);
  last->set_seconds(30);
  last->set_error("ranks [3] did not call checkpoint() in time");
  return s;
}

std::string Render(const proto::StatusReply& s, int width, bool colour,
                   const proto::StatusReply* previous = nullptr) {
  TopFrame frame;
  frame.status = &s;
  frame.previous = previous;
  frame.since_previous = absl::Seconds(2);
  frame.now = absl::FromUnixSeconds(1012);
  frame.target = "/run/zephon/zephond.sock";
  return absl::StrJoin(RenderTopView(frame, TopStyle{width, colour}), "\n");
}

TEST(TopViewTest, ShowsInstancesReadersLagRoundAndRate) {
  const proto::StatusReply s = Node();
  const std::string text = Render(s, 120, false);
  EXPECT_NE(text.find("zephond pid 4242  up 1h02m"), std::string::npos) << text;
  EXPECT_NE(text.find("r1/dp0/g0/3f2a9c0d11"), std::string::npos) << text;
  EXPECT_NE(text.find("pretrain-7b"), std::string::npos) << text;
  EXPECT_NE(text.find("41.2"), std::string::npos) << text;
  // Fill: the daemon's ring_occupancy, 6 of 8 slots.
  EXPECT_NE(text.find("6/8"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1    attached  lag 6"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 0    attached  lag 2    released 98  waiting"), std::string::npos)
      << text;
  EXPECT_NE(text.find("ok 3  error 0  timeout 1  last: pretrain-7b round 4 timeout 12 s ago"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("ranks [3] did not call"), std::string::npos) << text;
  EXPECT_EQ(text.find("\x1b["), std::string::npos) << "no escape codes without colour";
}

TEST(TopViewTest, CpuIsTheDifferenceOverTheInterval) {
  const proto::StatusReply now = Node();
  proto::StatusReply before = Node();
  before.set_process_cpu_s(9);  // 1 s of CPU in 2 s
  EXPECT_NE(Render(now, 120, false, &before).find("cpu 50%"), std::string::npos);
  EXPECT_NE(Render(now, 120, false).find("cpu -"), std::string::npos);
}

TEST(TopViewTest, NarrowTerminalCutsEveryLineToItsWidth) {
  const proto::StatusReply s = Node();
  for (int width : {20, 40, 60, 80}) {
    TopFrame frame;
    frame.status = &s;
    frame.now = absl::FromUnixSeconds(1012);
    frame.target = "/run/zephon/zephond.sock";
    for (const std::string& line : RenderTopView(frame, TopStyle{width, false})) {
      EXPECT_LE(static_cast<int>(line.size()), width) << line;
    }
  }
}

TEST(TopViewTest, ColourMarksButTheTextIsTheSame) {
  const proto::StatusReply s = Node();
  std::string coloured = Render(s, 100, true);
  EXPECT_NE(coloured.find("\x1b[33m"), std::string::npos);  // the waiting rank
  EXPECT_NE(coloured.find("\x1b[31m"), std::string::npos);  // the timed-out round
  // Without the escape codes, the same characters as the plain screen.
  std::string stripped;
  for (size_t i = 0; i < coloured.size(); ++i) {
    if (coloured[i] == '\x1b') {
      while (i < coloured.size() && coloured[i] != 'm') ++i;
      continue;
    }
    stripped += coloured[i];
  }
  EXPECT_EQ(stripped, Render(s, 100, false));
}

TEST(TopViewTest, AnUnansweredCallSaysSoAndKeepsTheLastFigures) {
  const proto::StatusReply s = Node();
  TopFrame frame;
  frame.status = &s;
  frame.now = absl::FromUnixSeconds(1012);
  frame.error = "connect: no such file";
  const std::string text = absl::StrJoin(RenderTopView(frame, TopStyle{100, false}), "\n");
  EXPECT_NE(text.find("zephond does not answer: connect: no such file"), std::string::npos);
  EXPECT_NE(text.find("from its last answer"), std::string::npos);
  frame.status = nullptr;
  EXPECT_EQ(RenderTopView(frame, TopStyle{100, false}).size(), 2u);
}

TEST(TopViewTest, ShowsRunningConversionsDownloadsAndS3Calls) {
  proto::StatusReply s = Node();
  s.mutable_conversions()->set_active(2);
  s.mutable_conversions()->set_tokenized_bytes(3 << 20);
  s.mutable_conversions()->set_files_done(5);
  s.mutable_conversions()->set_current("/data/web/part-07.jsonl");
  s.mutable_shard_cache()->set_misses(4);
  s.mutable_shard_cache()->set_bytes_downloaded(1 << 20);
  proto::S3RequestStatus* get = s.add_s3_requests();
  get->set_op("GET");
  get->set_requests(12);
  get->set_retries(2);
  const std::string text = Render(s, 160, false);
  EXPECT_NE(text.find("tokenizing 2 file(s): 3.0 MiB tokenized so far, 5 done, now "
                      "/data/web/part-07.jsonl"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("downloaded 1.0 MiB"), std::string::npos) << text;
  EXPECT_NE(text.find("S3 GET 12 (2 retries, 0 failed)"), std::string::npos) << text;
}

TEST(TopViewTest, FillBarAndDurations) {
  EXPECT_EQ(FillBar(0, 8, 10), "[........]");
  EXPECT_EQ(FillBar(4, 8, 10), "[####....]");
  EXPECT_EQ(FillBar(9, 8, 10), "[########]");
  EXPECT_EQ(FillBar(1, 0, 3), "[#]");
  EXPECT_EQ(ShortDuration(absl::Seconds(45)), "45 s");
  EXPECT_EQ(ShortDuration(absl::Seconds(185)), "3m05s");
  EXPECT_EQ(ShortDuration(absl::Seconds(7380)), "2h03m");
  EXPECT_EQ(ShortDuration(absl::Hours(98)), "4d02h");
}

}  // namespace
}  // namespace zephon::ctl
