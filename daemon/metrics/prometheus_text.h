// Prometheus text exposition format (version 0.0.4): metric families with # HELP and
// # TYPE lines, samples with escaped label values, and a fixed-bucket histogram.
//
// Thread-safety: MetricFamily and RenderPrometheusText are thread-compatible;
// Histogram is thread-safe (lock-free atomics, relaxed: a scrape may see a sum and a
// count from slightly different moments, which Prometheus tolerates).
#ifndef ZEPHON_DAEMON_METRICS_PROMETHEUS_TEXT_H_
#define ZEPHON_DAEMON_METRICS_PROMETHEUS_TEXT_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace zephon::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

struct Sample {
  Labels labels;
  double value = 0;
  // Appended to the family name: "_bucket", "_sum", "_count" for histograms.
  std::string suffix;
};

struct MetricFamily {
  std::string name;  // e.g. "zephon_batches_produced_total"
  std::string help;
  std::string type;  // "counter", "gauge", "histogram"
  std::vector<Sample> samples;

  MetricFamily& Add(Labels labels, double value) {
    samples.push_back(Sample{std::move(labels), value, ""});
    return *this;
  }
};

// The text format of `families`, in order. Families without samples still get their
// HELP and TYPE lines. Label values are escaped (\\, \", \n); values are printed
// shortest-exact, with +Inf, -Inf and NaN spelled as Prometheus expects.
std::string RenderPrometheusText(const std::vector<MetricFamily>& families);

// A cumulative histogram over fixed upper bounds (seconds or any unit).
class Histogram {
 public:
  // REQUIRES: `upper_bounds` strictly increasing, at most kMaxBuckets of them.
  explicit Histogram(std::vector<double> upper_bounds);
  Histogram(const Histogram&) = delete;
  Histogram& operator=(const Histogram&) = delete;

  void Observe(double value);
  // Adds the _bucket (with le="+Inf"), _sum and _count samples under `labels`.
  void AppendTo(const Labels& labels, MetricFamily* family) const;

  static constexpr size_t kMaxBuckets = 16;

 private:
  const std::vector<double> upper_bounds_;
  std::atomic<uint64_t> counts_[kMaxBuckets + 1] = {};  // last: above every bound
  std::atomic<uint64_t> sum_micros_{0};
};

}  // namespace zephon::metrics

#endif  // ZEPHON_DAEMON_METRICS_PROMETHEUS_TEXT_H_
