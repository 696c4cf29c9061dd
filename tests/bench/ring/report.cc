#include "tests/bench/ring/report.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace zephon::shm::bench {
namespace {

std::string SizeName(uint64_t bytes) {
  if (bytes >= (1 << 20) && bytes % (1 << 20) == 0) return absl::StrCat(bytes >> 20, " MiB");
  if (bytes >= 1024 && bytes % 1024 == 0) return absl::StrCat(bytes >> 10, " KiB");
  return absl::StrCat(bytes, " B");
}

const CopyBaseline* CopyFor(const BenchReport& r, uint64_t bytes) {
  for (const CopyBaseline& c : r.copies) {
    if (c.bytes == bytes) return &c;
  }
  return nullptr;
}

double Us(double ns) { return ns / 1000.0; }

const char* Verdict(bool met) { return met ? "MET" : "MISSED"; }

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) {
      out += absl::StrFormat("\\u%04x", ch);
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

std::string JsonStats(const LatencyStats& s) {
  return absl::StrFormat(
      R"({"count": %d, "p50_ns": %d, "p99_ns": %d, "max_ns": %d, "mean_ns": %.1f})", s.count,
      s.p50_ns, s.p99_ns, s.max_ns, s.mean_ns);
}

}  // namespace

void PrintReport(const BenchReport& r, std::FILE* out) {
  const MachineInfo& m = r.machine;
  absl::FPrintF(out, "\n## Shared-memory ring benchmark%s\n\n", r.quick ? " (--quick)" : "");
  absl::FPrintF(out, "- machine: %d CPUs, %s, %.1f GiB RAM\n", m.nproc, m.cpu_model,
                m.mem_total_kib / 1048576.0);
  absl::FPrintF(out, "- kernel: %s\n- date: %s\n- command: %s\n", m.kernel, m.date_utc, m.command);
  absl::FPrintF(out, "- total run time: %.1f s; GB = 1e9 bytes\n", r.wall_seconds);

  absl::FPrintF(out,
                "\n### 1. Delivery throughput\n\n"
                "Copy baselines (this process, single thread; \"touch\" = sum every 64-bit "
                "word; \"ring working set\" = source rotates over as many buffers as the "
                "ring has slots):\n\n");
  absl::FPrintF(out,
                "| payload | memcpy GB/s (hot) | memcpy+touch GB/s (hot) | "
                "memcpy+touch GB/s (ring working set) | touch only GB/s (ring working "
                "set) |\n|---|---|---|---|---|\n");
  for (const CopyBaseline& c : r.copies) {
    absl::FPrintF(out, "| %s | %.2f | %.2f | %.2f (x%d) | %.2f (x%d) |\n", SizeName(c.bytes),
                  c.memcpy_gbps, c.memcpy_touch_gbps, c.ring_memcpy_touch_gbps, c.sources,
                  c.ring_touch_gbps, c.sources);
  }
  absl::FPrintF(out,
                "\nZero-copy ring (forked reader processes; each acquires, sums every 64-bit "
                "word of the batch, checks the sum, releases):\n\n");
  absl::FPrintF(out,
                "| payload | readers | batches/s per reader | GB/s per reader (slowest) | "
                "GB/s aggregate | per reader / memcpy (hot) | aggregate / memcpy (hot) | "
                "per reader / memcpy+touch (ring ws) | per reader / touch only | "
                "reader parks / batch | releases waking producer | sums ok |\n");
  absl::FPrintF(out, "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
  for (const ThroughputResult& t : r.throughput) {
    const CopyBaseline* c = CopyFor(r, t.config.payload_bytes);
    auto ratio = [](double a, double b) { return b > 0 ? a / b : 0.0; };
    absl::FPrintF(out,
                  "| %s | %d | %.0f | %.2f (%.2f) | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | "
                  "%.0f%% | %s |\n",
                  SizeName(t.config.payload_bytes), t.config.readers, t.batches_per_s,
                  t.reader_gbps, t.min_reader_gbps, t.aggregate_gbps,
                  ratio(t.reader_gbps, c ? c->memcpy_gbps : 0),
                  ratio(t.aggregate_gbps, c ? c->memcpy_gbps : 0),
                  ratio(t.reader_gbps, c ? c->ring_memcpy_touch_gbps : 0),
                  ratio(t.reader_gbps, c ? c->ring_touch_gbps : 0), t.reader_parks_per_batch,
                  100 * t.producer_wakes_per_release, t.sum_mismatches == 0 ? "yes" : "NO");
  }

  absl::FPrintF(out,
                "\n### 2. Hand-off latency, publish -> Acquire returns (1 reader, "
                "publishes %d us apart)\n\n",
                r.latency.empty() ? 0 : absl::ToInt64Microseconds(r.latency[0].config.gap));
  absl::FPrintF(out,
                "| reader mode | samples | p50 us | p99 us | max us | mean us | "
                "Publish() call p50 us | voluntary ctx switches / batch |\n");
  absl::FPrintF(out, "|---|---|---|---|---|---|---|---|\n");
  for (const LatencyResult& l : r.latency) {
    absl::FPrintF(out, "| %s | %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |\n",
                  WaitModeName(l.config.mode), l.handoff.count, Us(l.handoff.p50_ns),
                  Us(l.handoff.p99_ns), Us(l.handoff.max_ns), Us(l.handoff.mean_ns),
                  Us(l.publish_call.p50_ns), l.voluntary_switches_per_batch);
  }

  absl::FPrintF(out,
                "\n### 3. Reader CPU per batch, Acquire + Release only (ring full, "
                "reader never waits)\n\n");
  absl::FPrintF(out,
                "| producer | batches | CPU us / batch | wall us / batch | "
                "releases that woke the producer |\n|---|---|---|---|---|\n");
  for (const ReaderCpuResult& c : r.reader_cpu) {
    absl::FPrintF(out, "| %s | %d | %.2f | %.2f | %.0f%% |\n", ProducerModeName(c.config.mode),
                  c.batches, Us(c.cpu_ns_per_batch), Us(c.wall_ns_per_batch),
                  100 * c.wakes_per_release);
  }

  absl::FPrintF(out, "\n### Targets\n\n");
  std::vector<std::string> met, missed;
  for (const ThroughputResult& t : r.throughput) {
    const CopyBaseline* c = CopyFor(r, t.config.payload_bytes);
    if (t.config.payload_bytes < kDeliveryTargetMinBytes || c == nullptr) continue;
    (t.reader_gbps >= c->memcpy_gbps ? met : missed)
        .push_back(absl::StrFormat("%s x%d (%.2fx)", SizeName(t.config.payload_bytes),
                                   t.config.readers, t.reader_gbps / c->memcpy_gbps));
  }
  absl::FPrintF(out,
                "- delivered GB/s per reader >= memcpy GB/s at >= 1 MiB: %s; met: %s; "
                "missed: %s\n",
                Verdict(missed.empty() && !met.empty()),
                met.empty() ? "none" : absl::StrJoin(met, ", "),
                missed.empty() ? "none" : absl::StrJoin(missed, ", "));
  met.clear();
  missed.clear();
  for (const ThroughputResult& t : r.throughput) {
    const CopyBaseline* c = CopyFor(r, t.config.payload_bytes);
    if (t.config.payload_bytes < kDeliveryTargetMinBytes || c == nullptr) continue;
    (t.aggregate_gbps >= c->memcpy_gbps ? met : missed)
        .push_back(absl::StrFormat("%s x%d (%.2fx)", SizeName(t.config.payload_bytes),
                                   t.config.readers, t.aggregate_gbps / c->memcpy_gbps));
  }
  absl::FPrintF(out,
                "- (same, aggregate over readers) delivered GB/s >= memcpy GB/s at >= 1 MiB: "
                "met: %s; missed: %s\n",
                met.empty() ? "none" : absl::StrJoin(met, ", "),
                missed.empty() ? "none" : absl::StrJoin(missed, ", "));
  for (const LatencyResult& l : r.latency) {
    if (l.config.mode != WaitMode::kBlocked) continue;
    absl::FPrintF(out, "- blocked hand-off p50 < %.0f us: %s (%.1f us)\n", kBlockedP50TargetUs,
                  Verdict(Us(l.handoff.p50_ns) < kBlockedP50TargetUs), Us(l.handoff.p50_ns));
  }
  for (const ReaderCpuResult& c : r.reader_cpu) {
    absl::FPrintF(out, "- reader CPU per Acquire+Release < %.0f us, %s: %s (%.2f us)\n",
                  kReaderCpuTargetUs, ProducerModeName(c.config.mode),
                  Verdict(Us(c.cpu_ns_per_batch) < kReaderCpuTargetUs), Us(c.cpu_ns_per_batch));
  }
  absl::FPrintF(out, "\n");
}

absl::Status WriteJson(const BenchReport& r, const std::string& path) {
  const MachineInfo& m = r.machine;
  std::string j = "{\n";
  absl::StrAppendFormat(&j,
                        R"(  "machine": {"nproc": %d, "cpu_model": %s, "kernel": %s, )"
                        R"("mem_total_kib": %d},)"
                        "\n",
                        m.nproc, JsonString(m.cpu_model), JsonString(m.kernel), m.mem_total_kib);
  absl::StrAppendFormat(&j, "  \"date_utc\": %s,\n  \"command\": %s,\n  \"quick\": %s,\n",
                        JsonString(m.date_utc), JsonString(m.command), r.quick ? "true" : "false");
  absl::StrAppendFormat(&j, "  \"wall_seconds\": %.2f,\n  \"memcpy\": [\n", r.wall_seconds);
  std::vector<std::string> rows;
  for (const CopyBaseline& c : r.copies) {
    rows.push_back(absl::StrFormat(
        R"(    {"bytes": %d, "memcpy_gbps": %.3f, "memcpy_touch_gbps": %.3f, "sources": %d, )"
        R"("ring_memcpy_touch_gbps": %.3f, "ring_touch_gbps": %.3f})",
        c.bytes, c.memcpy_gbps, c.memcpy_touch_gbps, c.sources, c.ring_memcpy_touch_gbps,
        c.ring_touch_gbps));
  }
  absl::StrAppend(&j, absl::StrJoin(rows, ",\n"), "\n  ],\n  \"throughput\": [\n");
  rows.clear();
  for (const ThroughputResult& t : r.throughput) {
    rows.push_back(absl::StrFormat(
        R"(    {"payload_bytes": %d, "readers": %d, "slot_count": %d, "batches_per_reader": %d, )"
        R"("batches_per_s_per_reader": %.1f, "reader_gbps": %.3f, "min_reader_gbps": %.3f, )"
        R"("aggregate_gbps": %.3f, "sum_mismatches": %d, "reader_parks_per_batch": %.3f, )"
        R"("producer_wakes_per_release": %.3f})",
        t.config.payload_bytes, t.config.readers, t.config.slot_count, t.batches_per_reader,
        t.batches_per_s, t.reader_gbps, t.min_reader_gbps, t.aggregate_gbps, t.sum_mismatches,
        t.reader_parks_per_batch, t.producer_wakes_per_release));
  }
  absl::StrAppend(&j, absl::StrJoin(rows, ",\n"), "\n  ],\n  \"latency\": [\n");
  rows.clear();
  for (const LatencyResult& l : r.latency) {
    rows.push_back(absl::StrFormat(
        R"(    {"mode": %s, "gap_us": %d, "handoff": %s, "publish_call": %s, )"
        R"("voluntary_switches_per_batch": %.3f, "empty_polls_per_batch": %.1f})",
        JsonString(std::string(WaitModeName(l.config.mode))),
        absl::ToInt64Microseconds(l.config.gap), JsonStats(l.handoff), JsonStats(l.publish_call),
        l.voluntary_switches_per_batch, l.empty_polls_per_batch));
  }
  absl::StrAppend(&j, absl::StrJoin(rows, ",\n"), "\n  ],\n  \"reader_cpu\": [\n");
  rows.clear();
  for (const ReaderCpuResult& c : r.reader_cpu) {
    rows.push_back(
        absl::StrFormat(R"(    {"producer": %s, "batches": %d, "cpu_ns_per_batch": %.1f, )"
                        R"("wall_ns_per_batch": %.1f, "wakes_per_release": %.3f})",
                        JsonString(std::string(ProducerModeName(c.config.mode))), c.batches,
                        c.cpu_ns_per_batch, c.wall_ns_per_batch, c.wakes_per_release));
  }
  absl::StrAppend(&j, absl::StrJoin(rows, ",\n"), "\n  ]\n}\n");
  std::ofstream f(path);
  f << j;
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace zephon::shm::bench
