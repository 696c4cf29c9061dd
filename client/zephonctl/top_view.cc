#include "client/zephonctl/top_view.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/zephonctl/output.h"

namespace zephon::ctl {
namespace {

constexpr char kBold[] = "\x1b[1m";
constexpr char kRed[] = "\x1b[31m";
constexpr char kYellow[] = "\x1b[33m";
constexpr char kReverse[] = "\x1b[7m";
constexpr char kReset[] = "\x1b[0m";

// Lines under construction: each one's visible text and its colour, cut to the width
// before the colour is applied so that escape codes never count as columns.
class Screen {
 public:
  explicit Screen(const TopStyle& style) : width_(std::max(20, style.width)),
                                           colour_(style.colour) {}
  void Add(std::string text, const char* sgr = nullptr) {
    if (static_cast<int>(text.size()) > width_) text.resize(width_);
    if (colour_ && sgr != nullptr && !text.empty()) text = absl::StrCat(sgr, text, kReset);
    lines_.push_back(std::move(text));
  }
  int width() const { return width_; }
  std::vector<std::string> Take() { return std::move(lines_); }

 private:
  const int width_;
  const bool colour_;
  std::vector<std::string> lines_;
};

std::string DaemonLine(const TopFrame& f) {
  const proto::StatusReply& s = *f.status;
  std::string cpu = "-";
  if (f.previous != nullptr && f.since_previous > absl::ZeroDuration()) {
    const double used = s.process_cpu_s() - f.previous->process_cpu_s();
    cpu = absl::StrFormat("%.0f%%", 100.0 * std::max(0.0, used) /
                                        absl::ToDoubleSeconds(f.since_previous));
  }
  return absl::StrFormat("zephond pid %d  up %s  cpu %s  peak rss %s  threads %d", s.pid(),
                         ShortDuration(absl::Seconds(s.uptime_s())), cpu,
                         HumanBytes(s.peak_rss_bytes()), s.worker_threads());
}

void RoundLines(const TopFrame& f, Screen* screen) {
  const proto::CheckpointRoundsStatus& r = f.status->checkpoint_rounds();
  std::string line = absl::StrFormat("checkpoint rounds  ok %d  error %d  timeout %d", r.ok(),
                                     r.error(), r.timeout());
  if (!r.has_last()) {
    screen->Add(absl::StrCat(line, "  last: none yet"));
    return;
  }
  const proto::LastCheckpointRound& last = r.last();
  const absl::Duration ago = f.now - absl::FromUnixNanos(static_cast<int64_t>(
                                         last.finished_unix_s() * 1e9));
  absl::StrAppendFormat(&line, "  last: %s round %d %s %s ago (%.1f s)",
                        last.run_id().empty() ? "-" : last.run_id(), last.round(),
                        last.result(), ShortDuration(std::max(ago, absl::ZeroDuration())),
                        last.seconds());
  const bool failed = last.result() != "ok";
  screen->Add(line, failed ? kRed : nullptr);
  if (failed && !last.error().empty()) screen->Add(absl::StrCat("  ", last.error()), kRed);
}

void CacheLines(const proto::StatusReply& s, Screen* screen) {
  if (s.has_token_cache()) {
    const proto::TokenCacheStatus& t = s.token_cache();
    screen->Add(absl::StrFormat(
                    "token cache %s of %s (%d entries, %s pinned%s)  hits %d  misses %d",
                    HumanBytes(t.bytes()),
                    t.budget_bytes() == 0 ? "no budget" : HumanBytes(t.budget_bytes()),
                    t.entries(), HumanBytes(t.pinned_bytes()),
                    t.over_budget() ? ", OVER BUDGET" : "", t.hits(), t.misses()),
                t.over_budget() ? kRed : nullptr);
  }
  const proto::ConversionStatus& c = s.conversions();
  if (c.active() > 0) {
    screen->Add(absl::StrFormat("tokenizing %d file(s): %s tokenized so far, %d done%s",
                                c.active(), HumanBytes(c.tokenized_bytes()), c.files_done(),
                                c.current().empty() ? "" : absl::StrCat(", now ", c.current())),
                kYellow);
  }
  if (s.has_shard_cache() && (s.shard_cache().hits() + s.shard_cache().misses() > 0 ||
                              s.shard_cache().resident_bytes() > 0)) {
    const proto::ShardCacheStatus& c = s.shard_cache();
    screen->Add(absl::StrFormat(
        "shard cache %s of %s (%s pinned)  hits %d  misses %d  downloaded %s  errors %d",
        HumanBytes(c.resident_bytes()), HumanBytes(c.limit_bytes()),
        HumanBytes(c.pinned_bytes()), c.hits(), c.misses(), HumanBytes(c.bytes_downloaded()),
        c.errors()), c.errors() > 0 ? kRed : nullptr);
  }
  if (s.s3_requests_size() > 0) {
    std::vector<std::string> ops;
    uint64_t errors = 0;
    for (const proto::S3RequestStatus& r : s.s3_requests()) {
      ops.push_back(absl::StrFormat("%s %d (%d retries, %d failed)", r.op(), r.requests(),
                                    r.retries(), r.errors()));
      errors += r.errors();
    }
    screen->Add(absl::StrCat("S3 ", absl::StrJoin(ops, "  ")), errors > 0 ? kRed : nullptr);
  }
}

void InstanceLines(const proto::StatusReply& s, Screen* screen) {
  if (s.instances().empty()) {
    screen->Add("no instances: no rank is attached");
    return;
  }
  // INSTANCE RUN DP BATCH/S RING: the id and run take what the bar leaves.
  const int w = screen->width();
  const int bar = std::clamp(w - 62, 7, 32);
  const int id_w = std::clamp(w - bar - 38, 8, 40);
  const int run_w = std::clamp((w - bar - 38) / 2, 3, 16);
  screen->Add(absl::StrFormat("%-*s %-*s %5s %8s  %s", id_w, "INSTANCE", run_w, "RUN", "DP",
                              "BATCH/S", "RING FILL"),
              kReverse);
  for (const proto::InstanceStatus& in : s.instances()) {
    // The daemon's figures, as /metrics exports them (zephon_ring_occupancy, _lag_batches).
    const uint64_t fill = in.ring_occupancy();
    const std::string id = in.instance_id().substr(
        0, static_cast<size_t>(id_w));
    const std::string run = (in.run_id().empty() ? "-" : in.run_id())
                                .substr(0, static_cast<size_t>(run_w));
    screen->Add(absl::StrFormat("%-*s %-*s %5s %8.1f  %s %d/%d", id_w, id, run_w, run,
                                absl::StrCat(in.dp_group_id(), "/", in.dp_degree()),
                                in.released_per_s(), FillBar(fill, in.ring_slots(), bar), fill,
                                in.ring_slots()),
                kBold);
    for (const proto::ReaderStatus& r : in.readers()) {
      std::string line = absl::StrFormat("  rank %-4d %-9s lag %-4d released %d",
                                         r.global_rank(), r.state(), r.lag(), r.released());
      if (r.waiting()) line += "  waiting";
      screen->Add(line, r.waiting() ? kYellow : nullptr);
    }
    if (in.readers().empty()) screen->Add("  no readers");
  }
}

}  // namespace

std::string FillBar(uint64_t used, uint64_t capacity, int width) {
  const int inner = std::max(1, width - 2);
  const uint64_t cap = std::max<uint64_t>(capacity, 1);
  const int full = static_cast<int>(std::min<uint64_t>(used, cap) * inner / cap);
  return absl::StrCat("[", std::string(full, '#'), std::string(inner - full, '.'), "]");
}

std::string ShortDuration(absl::Duration d) {
  const int64_t s = absl::ToInt64Seconds(d);
  if (s < 60) return absl::StrCat(s, " s");
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, (s % 86400) / 3600);
}

std::vector<std::string> RenderTopView(const TopFrame& frame, const TopStyle& style) {
  Screen screen(style);
  screen.Add(absl::StrCat("zephonctl top  ", frame.target, "  ",
                          absl::FormatTime("%H:%M:%S", frame.now, absl::LocalTimeZone()),
                          "  (q quits)"),
             kReverse);
  if (!frame.error.empty()) {
    screen.Add(absl::StrCat("zephond does not answer: ", frame.error), kRed);
    if (frame.status == nullptr) return screen.Take();
    screen.Add("(the figures below are from its last answer)", kRed);
  }
  if (frame.status == nullptr) {
    screen.Add("waiting for zephond's first answer");
    return screen.Take();
  }
  screen.Add(DaemonLine(frame));
  RoundLines(frame, &screen);
  CacheLines(*frame.status, &screen);
  screen.Add("");
  InstanceLines(*frame.status, &screen);
  return screen.Take();
}

}  // namespace zephon::ctl
