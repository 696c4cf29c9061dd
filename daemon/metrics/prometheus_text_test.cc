#include "daemon/metrics/prometheus_text.h"

#include <gtest/gtest.h>

#include "daemon/metrics/daemon_metrics.h"

namespace zephon::metrics {
namespace {

TEST(PrometheusTextTest, RendersHelpTypeAndLabeledSamples) {
  MetricFamily f;
  f.name = "zephon_batches_produced_total";
  f.help = "Batches published.";
  f.type = "counter";
  f.Add({{"instance_id", "r1/dp2/g0#1"}, {"run", "r1"}}, 1234567);
  f.Add({}, 0.5);
  EXPECT_EQ(RenderPrometheusText({f}),
            "# HELP zephon_batches_produced_total Batches published.\n"
            "# TYPE zephon_batches_produced_total counter\n"
            "zephon_batches_produced_total{instance_id=\"r1/dp2/g0#1\",run=\"r1\"} 1234567\n"
            "zephon_batches_produced_total 0.5\n");
}

TEST(PrometheusTextTest, EscapesLabelValuesAndHelp) {
  MetricFamily f;
  f.name = "m";
  f.help = "a\\b\nc";
  f.type = "gauge";
  f.Add({{"l", "q\"\\\n"}}, 1);
  EXPECT_EQ(RenderPrometheusText({f}),
            "# HELP m a\\\\b\\nc\n# TYPE m gauge\nm{l=\"q\\\"\\\\\\n\"} 1\n");
}

TEST(PrometheusTextTest, FamilyWithoutSamplesKeepsItsHeader) {
  MetricFamily f;
  f.name = "zephon_ring_slots";
  f.help = "Slots.";
  f.type = "gauge";
  EXPECT_EQ(RenderPrometheusText({f}), "# HELP zephon_ring_slots Slots.\n# TYPE zephon_ring_slots gauge\n");
}

TEST(PrometheusTextTest, HistogramIsCumulativeWithInfSumAndCount) {
  Histogram h({0.1, 1});
  h.Observe(0.05);
  h.Observe(0.5);
  h.Observe(3);
  MetricFamily f;
  f.name = "zephon_checkpoint_round_seconds";
  f.help = "Rounds.";
  f.type = "histogram";
  h.AppendTo({}, &f);
  EXPECT_EQ(RenderPrometheusText({f}),
            "# HELP zephon_checkpoint_round_seconds Rounds.\n"
            "# TYPE zephon_checkpoint_round_seconds histogram\n"
            "zephon_checkpoint_round_seconds_bucket{le=\"0.1\"} 1\n"
            "zephon_checkpoint_round_seconds_bucket{le=\"1\"} 2\n"
            "zephon_checkpoint_round_seconds_bucket{le=\"+Inf\"} 3\n"
            "zephon_checkpoint_round_seconds_sum 3.55\n"
            "zephon_checkpoint_round_seconds_count 3\n");
}

TEST(DaemonMetricsTest, InstanceAndReaderFiguresCarryTheirLabels) {
  proto::StatusReply status;
  proto::InstanceStatus* s = status.add_instances();
  s->set_instance_id("r1/dp1/g0/abcd#1");
  s->set_run_id("r1");
  s->set_dp_group_id(0);
  s->set_produced(10);
  s->set_released(7);
  s->set_ring_occupancy(3);
  s->set_ring_slots(8);
  s->set_readers_attached(1);
  proto::ReaderStatus* r = s->add_readers();
  r->set_global_rank(3);
  r->set_state("attached");
  r->set_lag(3);
  ProcessStats process;
  process.shm_free_bytes = 4096;
  const std::string text =
      RenderPrometheusText(CollectDaemonMetrics(status, DaemonCounters(), process));
  const std::string labels = "{instance_id=\"r1/dp1/g0/abcd#1\",run=\"r1\",dp_group=\"0\"";
  EXPECT_NE(text.find("zephon_batches_produced_total" + labels + "} 10\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_batches_released_total" + labels + "} 7\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_ring_slots" + labels + "} 8\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_reader_lag_batches" + labels + ",rank=\"3\"} 3\n"),
            std::string::npos);
  EXPECT_NE(text.find("zephon_shm_free_bytes 4096\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE zephon_errors_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_instances 1\n"), std::string::npos);
  EXPECT_EQ(text.find("zephon_shard_cache"), std::string::npos);  // no cache, no families
  EXPECT_EQ(text.find("zephon_token_cache"), std::string::npos);
}

// The old name stays exported for one release, with the same value and HELP saying so.
TEST(DaemonMetricsTest, DeliveredIsADeprecatedAliasOfReleased) {
  proto::StatusReply status;
  proto::InstanceStatus* s = status.add_instances();
  s->set_instance_id("i");
  s->set_run_id("r");
  s->set_produced(50);
  s->set_released(41);
  const std::string text =
      RenderPrometheusText(CollectDaemonMetrics(status, DaemonCounters(), ProcessStats()));
  const std::string labels = "{instance_id=\"i\",run=\"r\",dp_group=\"0\"}";
  EXPECT_NE(text.find("zephon_batches_released_total" + labels + " 41\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_batches_delivered_total" + labels + " 41\n"), std::string::npos);
  EXPECT_NE(text.find("# HELP zephon_batches_delivered_total Deprecated alias of "
                      "zephon_batches_released_total"),
            std::string::npos);
  EXPECT_NE(text.find("# TYPE zephon_batches_delivered_total counter\n"), std::string::npos);
}

TEST(DaemonMetricsTest, ShardCacheFiguresComeFromTheStatus) {
  proto::StatusReply status;
  proto::ShardCacheStatus* c = status.mutable_shard_cache();
  c->set_hits(12);
  c->set_misses(3);
  c->set_bytes_downloaded(3 << 20);
  c->set_evictions(2);
  c->set_resident_bytes(4096);
  c->set_limit_bytes(1 << 30);
  const std::string text =
      RenderPrometheusText(CollectDaemonMetrics(status, DaemonCounters(), ProcessStats()));
  EXPECT_NE(text.find("# TYPE zephon_shard_cache_hits_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_shard_cache_hits_total 12\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_shard_cache_misses_total 3\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_shard_cache_downloaded_bytes_total 3145728\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_shard_cache_evictions_total 2\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE zephon_shard_cache_resident_bytes gauge\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_shard_cache_resident_bytes 4096\n"), std::string::npos);
}

TEST(DaemonMetricsTest, TokenCacheFiguresComeFromTheStatus) {
  proto::StatusReply status;
  proto::TokenCacheStatus* t = status.mutable_token_cache();
  t->set_entries(4);
  t->set_bytes(5000);
  t->set_budget_bytes(8192);
  t->set_hits(9);
  t->set_misses(2);
  t->set_evictions(1);
  t->set_over_budget(true);
  const std::string text =
      RenderPrometheusText(CollectDaemonMetrics(status, DaemonCounters(), ProcessStats()));
  EXPECT_NE(text.find("# TYPE zephon_token_cache_hits_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_token_cache_hits_total 9\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_token_cache_misses_total 2\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_token_cache_evictions_total 1\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE zephon_token_cache_bytes gauge\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_token_cache_bytes 5000\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_token_cache_budget_bytes 8192\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_token_cache_entries 4\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_token_cache_over_budget 1\n"), std::string::npos);
  EXPECT_NE(text.find("# HELP zephon_token_cache_hits_total JSONL shard opens"),
            std::string::npos);
}

TEST(DaemonMetricsTest, TextDatasetFiguresArePerInstanceAndDataset) {
  proto::StatusReply status;
  proto::InstanceStatus* instance = status.add_instances();
  instance->set_instance_id("run-a/dp0");
  instance->set_run_id("run-a");
  proto::TextDatasetStatus* web = instance->add_text_datasets();
  web->set_dataset("web");
  web->set_records(120);
  web->set_tokens(9000);
  web->set_invalid_utf8_records(3);
  web->set_skipped_missing(2);
  web->set_null_records(4);
  const std::string text =
      RenderPrometheusText(CollectDaemonMetrics(status, DaemonCounters(), ProcessStats()));
  const std::string labels = "{instance_id=\"run-a/dp0\",run=\"run-a\",dp_group=\"0\",dataset=\"web\"}";
  EXPECT_NE(text.find("# TYPE zephon_text_invalid_utf8_records gauge\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_text_records" + labels + " 120\n"), std::string::npos) << text;
  EXPECT_NE(text.find("zephon_text_tokens" + labels + " 9000\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_text_invalid_utf8_records" + labels + " 3\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_text_skipped_records" + labels + " 2\n"), std::string::npos);
  EXPECT_NE(text.find("zephon_text_null_records" + labels + " 4\n"), std::string::npos);
}

}  // namespace
}  // namespace zephon::metrics
