#include "daemon/metrics/prometheus_text.h"

#include <cmath>

#include <fmt/format.h>

namespace zephon::metrics {
namespace {

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  return fmt::format("{}", v);
}

void AppendEscaped(const std::string& value, std::string* out) {
  for (char c : value) {
    switch (c) {
      case '\\': out->append("\\\\"); break;
      case '"': out->append("\\\""); break;
      case '\n': out->append("\\n"); break;
      default: out->push_back(c);
    }
  }
}

void AppendHelp(const std::string& help, std::string* out) {
  for (char c : help) {
    if (c == '\\') {
      out->append("\\\\");
    } else if (c == '\n') {
      out->append("\\n");
    } else {
      out->push_back(c);
    }
  }
}

}  // namespace

std::string RenderPrometheusText(const std::vector<MetricFamily>& families) {
  std::string out;
  for (const MetricFamily& f : families) {
    out.append("# HELP ").append(f.name).append(" ");
    AppendHelp(f.help, &out);
    out.append("\n# TYPE ").append(f.name).append(" ").append(f.type).append("\n");
    for (const Sample& s : f.samples) {
      out.append(f.name).append(s.suffix);
      if (!s.labels.empty()) {
        out.push_back('{');
        for (size_t i = 0; i < s.labels.size(); ++i) {
          if (i > 0) out.push_back(',');
          out.append(s.labels[i].first).append("=\"");
          AppendEscaped(s.labels[i].second, &out);
          out.push_back('"');
        }
        out.push_back('}');
      }
      out.push_back(' ');
      out.append(FormatValue(s.value));
      out.push_back('\n');
    }
  }
  return out;
}

Histogram::Histogram(std::vector<double> upper_bounds) : upper_bounds_(std::move(upper_bounds)) {
  if (upper_bounds_.size() > kMaxBuckets) std::abort();  // a programming error
}

void Histogram::Observe(double value) {
  size_t i = 0;
  while (i < upper_bounds_.size() && value > upper_bounds_[i]) ++i;
  counts_[i].fetch_add(1, std::memory_order_relaxed);
  const double micros = value > 0 ? value * 1e6 : 0;
  sum_micros_.fetch_add(static_cast<uint64_t>(std::llround(micros)), std::memory_order_relaxed);
}

void Histogram::AppendTo(const Labels& labels, MetricFamily* family) const {
  uint64_t cumulative = 0;
  for (size_t i = 0; i <= upper_bounds_.size(); ++i) {
    cumulative += counts_[i].load(std::memory_order_relaxed);
    Labels with_le = labels;
    with_le.emplace_back("le", i < upper_bounds_.size() ? FormatValue(upper_bounds_[i]) : "+Inf");
    family->samples.push_back(Sample{std::move(with_le), static_cast<double>(cumulative),
                                     "_bucket"});
  }
  family->samples.push_back(
      Sample{labels, static_cast<double>(sum_micros_.load(std::memory_order_relaxed)) / 1e6,
             "_sum"});
  family->samples.push_back(Sample{labels, static_cast<double>(cumulative), "_count"});
}

}  // namespace zephon::metrics
