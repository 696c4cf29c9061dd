#include "daemon/metrics/daemon_metrics.h"

#include <string>
#include <vector>

#include "daemon/metrics/counters.h"
#include "gtest/gtest.h"

namespace zephon::metrics {
namespace {

// The family named `name`, or null.
const MetricFamily* Find(const std::vector<MetricFamily>& families, const std::string& name) {
  for (const MetricFamily& f : families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string Label(const Sample& s, const std::string& key) {
  for (const auto& [k, v] : s.labels) {
    if (k == key) return v;
  }
  return "<none>";
}

proto::StatusReply OneInstanceTwoReaders() {
  proto::StatusReply status;
  proto::InstanceStatus* instance = status.add_instances();
  instance->set_instance_id("r1/dp0/g0/abcd");
  instance->set_run_id("run-a");
  instance->set_dp_group_id(0);
  for (uint32_t rank : {0u, 1u}) {
    proto::ReaderStatus* r = instance->add_readers();
    r->set_state("attached");
    r->set_global_rank(rank);
    r->set_lag(rank == 0 ? 0 : 6);
    r->set_waiting(rank == 0);
  }
  return status;
}

TEST(CollectDaemonMetricsTest, InstanceLabelIsInstanceIdNotPrometheusTargetLabel) {
  // Prometheus attaches `instance` (the scrape target) itself; a scraped `instance`
  // label would be renamed exported_instance.
  DaemonCounters counters;
  const std::vector<MetricFamily> families =
      CollectDaemonMetrics(OneInstanceTwoReaders(), counters, ProcessStats{});
  for (const MetricFamily& f : families) {
    for (const Sample& s : f.samples) {
      EXPECT_EQ(Label(s, "instance"), "<none>") << f.name;
      EXPECT_EQ(Label(s, "job"), "<none>") << f.name;
    }
  }
  const MetricFamily* lag = Find(families, "zephon_reader_lag_batches");
  ASSERT_NE(lag, nullptr);
  ASSERT_EQ(lag->samples.size(), 2u);
  EXPECT_EQ(Label(lag->samples[0], "instance_id"), "r1/dp0/g0/abcd");
}

TEST(CollectDaemonMetricsTest, ReaderWaitingIsOneOnlyForTheWaitingRank) {
  DaemonCounters counters;
  const std::vector<MetricFamily> families =
      CollectDaemonMetrics(OneInstanceTwoReaders(), counters, ProcessStats{});
  const MetricFamily* waiting = Find(families, "zephon_reader_waiting");
  ASSERT_NE(waiting, nullptr);
  ASSERT_EQ(waiting->samples.size(), 2u);
  EXPECT_EQ(Label(waiting->samples[0], "rank"), "0");
  EXPECT_EQ(waiting->samples[0].value, 1);
  EXPECT_EQ(waiting->samples[1].value, 0);
}

TEST(CollectDaemonMetricsTest, CheckpointRoundsCountTimeoutsApartFromErrors) {
  DaemonCounters counters;
  using Result = DaemonCounters::RoundResult;
  for (Result r : {Result::kOk, Result::kTimeout, Result::kTimeout, Result::kError}) {
    DaemonCounters::RoundOutcome outcome;
    outcome.result = r;
    counters.CountCheckpointRound(outcome);
  }
  const std::vector<MetricFamily> families =
      CollectDaemonMetrics(proto::StatusReply(), counters, ProcessStats{});
  const MetricFamily* rounds = Find(families, "zephon_checkpoint_rounds_total");
  ASSERT_NE(rounds, nullptr);
  ASSERT_EQ(rounds->samples.size(), 3u);
  EXPECT_EQ(Label(rounds->samples[0], "result"), "ok");
  EXPECT_EQ(rounds->samples[0].value, 1);
  EXPECT_EQ(Label(rounds->samples[1], "result"), "error");
  EXPECT_EQ(rounds->samples[1].value, 1);
  EXPECT_EQ(Label(rounds->samples[2], "result"), "timeout");
  EXPECT_EQ(rounds->samples[2].value, 2);
  EXPECT_EQ(counters.errors(ErrorKind::kCheckpoint), 3u);  // every failed round
}

TEST(CollectDaemonMetricsTest, S3FamiliesOnlyOnceAStoreWasUsed) {
  DaemonCounters counters;
  proto::StatusReply status;
  EXPECT_EQ(Find(CollectDaemonMetrics(status, counters, ProcessStats{}),
                 "zephon_s3_requests_total"),
            nullptr);
  proto::S3RequestStatus* get = status.add_s3_requests();
  get->set_op("GET");
  get->set_requests(10);
  get->set_retries(3);
  get->set_errors(1);
  const std::vector<MetricFamily> families =
      CollectDaemonMetrics(status, counters, ProcessStats{});
  for (const auto& [name, value] : std::vector<std::pair<std::string, double>>{
           {"zephon_s3_requests_total", 10},
           {"zephon_s3_retries_total", 3},
           {"zephon_s3_errors_total", 1}}) {
    const MetricFamily* f = Find(families, name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->type, "counter");
    ASSERT_EQ(f->samples.size(), 1u);
    EXPECT_EQ(Label(f->samples[0], "op"), "GET");
    EXPECT_EQ(f->samples[0].value, value) << name;
  }
}

TEST(CollectDaemonMetricsTest, ProcessStartTimeShmSizeAndConversions) {
  DaemonCounters counters;
  proto::StatusReply status;
  status.set_start_time_unix_s(1.7e9);
  status.mutable_conversions()->set_tokenized_bytes(4096);
  status.mutable_conversions()->set_files_done(2);
  status.mutable_conversions()->set_active(1);
  ProcessStats process;
  process.shm_size_bytes = 1 << 30;
  process.shm_free_bytes = 1 << 20;
  const std::vector<MetricFamily> families = CollectDaemonMetrics(status, counters, process);
  for (const auto& [name, value] : std::vector<std::pair<std::string, double>>{
           {"zephon_start_time_seconds", 1.7e9},
           {"zephon_shm_size_bytes", 1 << 30},
           {"zephon_shm_free_bytes", 1 << 20},
           {"zephon_tokenize_bytes_total", 4096},
           {"zephon_tokenize_files_total", 2},
           {"zephon_tokenize_active", 1}}) {
    const MetricFamily* f = Find(families, name);
    ASSERT_NE(f, nullptr) << name;
    ASSERT_EQ(f->samples.size(), 1u);
    EXPECT_EQ(f->samples[0].value, value) << name;
  }
}

}  // namespace
}  // namespace zephon::metrics
