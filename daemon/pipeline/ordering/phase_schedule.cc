#include "daemon/pipeline/ordering/phase_schedule.h"

#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/pipeline/ordering/mixture.h"

namespace zephon::pipeline {
namespace {

using u128 = unsigned __int128;

std::string Entry(int i) { return absl::StrCat("work_source.schedule[", i, "]"); }

// NormalizeWeights over the positive weights; zeros stay 0.
absl::StatusOr<std::vector<uint64_t>> NormalizeKeepingZeros(const std::vector<double>& w) {
  std::vector<double> positive;
  for (double x : w) {
    if (x > 0) positive.push_back(x);
  }
  auto normalized = NormalizeWeights(positive);
  if (!normalized.ok()) return normalized.status();
  std::vector<uint64_t> out;
  size_t next = 0;
  for (double x : w) out.push_back(x > 0 ? (*normalized)[next++] : 0);
  return out;
}

uint64_t LastChunkBefore(const PhaseSchedule& s, size_t k, uint64_t limit, uint64_t max_n) {
  std::vector<uint64_t> a;
  uint64_t lo = 0, hi = max_n;  // Invariant: A_k(lo) <= limit (A_k(0) = 0).
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo + 1) / 2;
    s.Cumulative(mid, &a);
    if (a[k] <= limit) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace

PhaseSchedule::PhaseSchedule(std::vector<SchedulePhase> phases, bool linear,
                             uint64_t chunk_size, size_t num_components)
    : phases_(std::move(phases)),
      linear_(linear),
      chunk_size_(chunk_size),
      num_components_(num_components) {}

absl::StatusOr<PhaseSchedule> PhaseSchedule::Create(const proto::WorkSourceSpec& spec) {
  if (spec.schedule_size() == 0) {
    return absl::InvalidArgumentError("work_source.schedule is empty: give at least (0, weights)");
  }
  if (spec.weights_size() > 0) {
    return absl::InvalidArgumentError(
        "work_source.weights and work_source.schedule are both set: a scheduled mixture's "
        "weights are its schedule's entries; drop the weights");
  }
  if (spec.weight_by() == proto::WorkSourceSpec::TOKENS) {
    return absl::InvalidArgumentError(
        "work_source.schedule with weight_by 'tokens' is not supported: schedule weights are "
        "sample shares (use weight_by 'samples')");
  }
  const uint64_t cs = spec.chunk_size();
  if (cs == 0) return absl::InvalidArgumentError("work_source.chunk_size must be >= 1");
  // A scheduled chunk holds more than chunk_size - K samples (each dataset's draws are
  // floors of its exact share): below K, a chunk may be empty and would end its lane.
  if (cs < static_cast<uint64_t>(spec.datasets_size())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "work_source.chunk_size ", cs, " is smaller than the ", spec.datasets_size(),
        " datasets of the schedule: a scheduled chunk holds chunk_size +- (datasets - 1) "
        "samples, so a chunk could be empty; use chunk_size >= ", spec.datasets_size()));
  }
  const uint64_t max_start = std::numeric_limits<uint64_t>::max() / cs - 1;
  const bool linear = spec.interpolate() == proto::WorkSourceSpec::LINEAR;
  if (spec.interpolate() != proto::WorkSourceSpec::INTERPOLATE_UNSPECIFIED &&
      spec.interpolate() != proto::WorkSourceSpec::STEP && !linear) {
    return absl::InvalidArgumentError(absl::StrCat("work_source.interpolate ",
                                                   spec.interpolate(), " unknown (step, linear)"));
  }
  std::vector<SchedulePhase> phases;
  for (int i = 0; i < spec.schedule_size(); ++i) {
    const proto::ScheduleEntry& e = spec.schedule(i);
    if (e.weights_size() != spec.datasets_size()) {
      return absl::InvalidArgumentError(absl::StrCat(Entry(i), " has ", e.weights_size(),
                                                     " weights, datasets has ",
                                                     spec.datasets_size()));
    }
    std::vector<double> w(e.weights().begin(), e.weights().end());
    bool any = false;
    for (size_t k = 0; k < w.size(); ++k) {
      if (!std::isfinite(w[k]) || w[k] < 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            Entry(i), " weight of dataset '", spec.datasets(static_cast<int>(k)).name(), "' = ",
            w[k], ": must be a finite number >= 0"));
      }
      any |= w[k] > 0;
    }
    if (!any) {
      return absl::InvalidArgumentError(
          absl::StrCat(Entry(i), " gives every dataset weight 0: at least one must be > 0"));
    }
    uint64_t start = 0;
    if (e.start_case() == proto::ScheduleEntry::kStartChunk) {
      start = e.start_chunk();
    } else if (e.start_case() == proto::ScheduleEntry::kStartSample) {
      start = e.start_sample() / cs + (e.start_sample() % cs != 0 ? 1 : 0);
    } else if (i > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(Entry(i), " has no start (start_sample or start_chunk)"));
    }
    if (i == 0 && start != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          Entry(0), " starts at chunk ", start, ": the first entry must start at 0"));
    }
    if (start > max_start) {
      return absl::InvalidArgumentError(absl::StrCat(Entry(i), " starts at chunk ", start,
                                                     ", beyond the last chunk (", max_start,
                                                     " at chunk_size ", cs, ")"));
    }
    if (i > 0 && start <= phases.back().start_chunk) {
      return absl::InvalidArgumentError(absl::StrCat(
          Entry(i), " starts at chunk ", start, ", not after ", Entry(i - 1), "'s chunk ",
          phases.back().start_chunk, " (a start in samples s is chunk ceil(s / chunk_size ",
          cs, ")): starts must strictly increase"));
    }
    if (i > 0 && linear && start - phases.back().start_chunk > kMaxLinearPhaseChunks) {
      return absl::InvalidArgumentError(absl::StrCat(
          Entry(i - 1), " to ", Entry(i), " is a linear ramp of ",
          start - phases.back().start_chunk, " chunks, over the ", kMaxLinearPhaseChunks,
          " supported: add an entry in between or raise chunk_size"));
    }
    auto normalized = NormalizeKeepingZeros(w);
    if (!normalized.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Entry(i), ": ", normalized.status().message()));
    }
    phases.push_back(SchedulePhase{start, *std::move(normalized)});
  }
  return PhaseSchedule(std::move(phases), linear, cs,
                       static_cast<size_t>(spec.datasets_size()));
}

void PhaseSchedule::Cumulative(uint64_t n, std::vector<uint64_t>* out) const {
  out->assign(num_components_, 0);
  const size_t num_phases = phases_.size();
  for (size_t k = 0; k < num_components_; ++k) {
    // 2 * sum_{g<n} W_k(g) = whole + partial / ramp (in units of 2^-32 samples per chunk).
    u128 whole = 0, partial = 0;
    uint64_t ramp = 1;
    for (size_t i = 0; i < num_phases && phases_[i].start_chunk < n; ++i) {
      const uint64_t s = phases_[i].start_chunk;
      const bool last = i + 1 == num_phases;
      const uint64_t end = last ? n : std::min(n, phases_[i + 1].start_chunk);
      const u128 m = end - s;
      const u128 w = phases_[i].weights[k];
      if (!linear_ || last) {
        whole += 2 * w * m;
        continue;
      }
      const u128 w_next = phases_[i + 1].weights[k];
      const u128 len = phases_[i + 1].start_chunk - s;
      if (m == len) {  // Full ramp: sum_{t<L} (w (L - t) + w' t) / L = (w (L+1) + w' (L-1)) / 2.
        whole += w * (len + 1) + w_next * (len - 1);
      } else {  // Partial: (w (2Lm - m(m-1)) + w' m(m-1)) / L; only the last phase counted.
        partial = w * (2 * len * m - m * (m - 1)) + w_next * m * (m - 1);
        ramp = static_cast<uint64_t>(len);
      }
    }
    // A = floor(cs * (whole + partial / ramp) / 2^33), split so nothing overflows:
    // cs * whole < 2^97; cs * partial < 2^127 (ramp <= 2^30, cs * m < 2^64).
    const u128 a = u128{chunk_size_} * whole;
    const u128 b = u128{chunk_size_} * partial;
    const u128 denom = u128{ramp} << 33;
    const u128 ra = a & ((u128{1} << 33) - 1);
    const u128 rb = b % denom;
    (*out)[k] = static_cast<uint64_t>((a >> 33) + b / denom + (ra * ramp + rb) / denom);
  }
}

std::optional<uint64_t> PhaseSchedule::LastChunk(size_t k, uint64_t limit) const {
  const SchedulePhase& last = phases_.back();
  std::vector<uint64_t> a;
  if (last.weights[k] == 0) {  // Never drawn from the last start on: A_k stops growing.
    Cumulative(last.start_chunk, &a);
    if (a[k] <= limit) return std::nullopt;
    return LastChunkBefore(*this, k, limit, last.start_chunk);
  }
  // From the last start on, A_k grows by >= chunk_size * w / 2^32 - 1 per chunk.
  const uint64_t cap = std::numeric_limits<uint64_t>::max() / chunk_size_ - 1;
  const u128 beyond = ((u128{limit} + 1) << 32) / (u128{last.weights[k]} * chunk_size_) + 2;
  const u128 bound = u128{last.start_chunk} + beyond;
  return LastChunkBefore(*this, k, limit, bound > cap ? cap : static_cast<uint64_t>(bound));
}

size_t PhaseSchedule::PhaseOf(uint64_t g) const {
  size_t i = 0;
  while (i + 1 < phases_.size() && phases_[i + 1].start_chunk <= g) ++i;
  return i;
}

std::vector<double> PhaseSchedule::WeightsAt(uint64_t g) const {
  const size_t i = PhaseOf(g);
  std::vector<double> out;
  for (size_t k = 0; k < num_components_; ++k) {
    double w = static_cast<double>(phases_[i].weights[k]);
    if (linear_ && i + 1 < phases_.size()) {
      const double len = static_cast<double>(phases_[i + 1].start_chunk - phases_[i].start_chunk);
      const double t = static_cast<double>(g - phases_[i].start_chunk);
      w = (w * (len - t) + static_cast<double>(phases_[i + 1].weights[k]) * t) / len;
    }
    out.push_back(w / static_cast<double>(kWeightOne));
  }
  return out;
}

std::string PhaseSchedule::Describe() const {
  std::vector<std::string> entries;
  for (const SchedulePhase& p : phases_) {
    std::vector<std::string> w;
    for (uint64_t x : p.weights) w.push_back(absl::StrCat(static_cast<double>(x) / kWeightOne));
    entries.push_back(absl::StrCat(p.start_chunk, ":(", absl::StrJoin(w, ","), ")"));
  }
  return absl::StrCat(" schedule=[", absl::StrJoin(entries, ", "), "] ",
                      linear_ ? "linear" : "step");
}

}  // namespace zephon::pipeline
