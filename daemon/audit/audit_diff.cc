#include "daemon/audit/audit_diff.h"

#include <algorithm>
#include <set>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace zephon::audit {
namespace {

constexpr size_t kListedSteps = 20;

std::set<std::vector<uint64_t>> Samples(const proto::AuditRecord& r) {
  std::set<std::vector<uint64_t>> out;
  for (int i = 0; i + 2 < r.sample_ids_size(); i += 3) {
    out.insert({r.sample_ids(i), r.sample_ids(i + 1), r.sample_ids(i + 2)});
  }
  return out;
}

bool SameBatch(const proto::AuditRecord& x, const proto::AuditRecord& y) {
  return x.token_sha256() == y.token_sha256() &&
         std::equal(x.sample_ids().begin(), x.sample_ids().end(), y.sample_ids().begin(),
                    y.sample_ids().end());
}

// The steps whose every batch `run` holds, within [from, to).
std::set<uint64_t> CompleteSteps(const RunIndex& run, uint64_t k, uint64_t from, uint64_t to) {
  std::map<uint64_t, uint64_t> held;  // step -> batches
  for (const auto& [key, record] : run.batches) {
    const uint64_t step = key.second / k;
    if (step >= from && step < to) ++held[step];
  }
  std::set<uint64_t> out;
  for (const auto& [step, n] : held) {
    if (n == k * run.canonical_replicas) out.insert(step);
  }
  return out;
}

}  // namespace

absl::StatusOr<RunIndex> IndexRun(const std::vector<proto::AuditRecord>& records) {
  RunIndex index;
  for (const proto::AuditRecord& r : records) {
    if (index.canonical_replicas == 0) index.canonical_replicas = r.canonical_replicas();
    if (r.canonical_replicas() != index.canonical_replicas) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the audit records disagree on canonical_replicas (", index.canonical_replicas,
          " and ", r.canonical_replicas(), "): they are not one run"));
    }
    if (std::find(index.spec_hashes.begin(), index.spec_hashes.end(), r.spec_hash()) ==
        index.spec_hashes.end()) {
      index.spec_hashes.push_back(r.spec_hash());
    }
    auto [it, inserted] = index.batches.try_emplace({r.lane(), r.lane_batch_index()}, r);
    if (!inserted && !SameBatch(it->second, r)) {
      return absl::DataLossError(absl::StrCat(
          "lane ", r.lane(), " batch ", r.lane_batch_index(), " was published twice with "
          "different content (instances ", it->second.instance_id(), " and ", r.instance_id(),
          "): the run's own batches are not deterministic"));
    }
  }
  return index;
}

absl::StatusOr<DiffReport> DiffRuns(const RunIndex& a, const RunIndex& b,
                                    uint64_t global_batches, uint64_t from, uint64_t to) {
  if (a.canonical_replicas != b.canonical_replicas) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the runs have different canonical_replicas (", a.canonical_replicas, " and ",
        b.canonical_replicas, "): their steps hold different lanes"));
  }
  const uint64_t c = a.canonical_replicas;
  if (c == 0) return absl::InvalidArgumentError("the audit logs hold no records");
  if (global_batches == 0) global_batches = c;
  if (global_batches % c != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global_batches ", global_batches, " must be a multiple of canonical_replicas ", c));
  }
  DiffReport report;
  report.batches_per_lane = global_batches / c;
  const uint64_t k = report.batches_per_lane;
  const std::set<uint64_t> in_a = CompleteSteps(a, k, from, to);
  const std::set<uint64_t> in_b = CompleteSteps(b, k, from, to);
  for (uint64_t step : in_a) {
    if (!in_b.count(step)) {
      if (report.only_a.size() < kListedSteps) report.only_a.push_back(step);
      continue;
    }
    ++report.steps_compared;
    if (!report.first_step) report.first_step = step;
    report.last_step = step;
    bool differs = false;
    for (uint32_t lane = 0; lane < c; ++lane) {
      for (uint64_t j = step * k; j < (step + 1) * k; ++j) {
        const proto::AuditRecord& x = a.batches.at({lane, j});
        const proto::AuditRecord& y = b.batches.at({lane, j});
        if (SameBatch(x, y)) continue;
        differs = true;
        if (report.first_difference) continue;
        StepDifference d;
        d.step = step;
        d.lane = lane;
        d.lane_batch = j;
        d.a_sha256 = absl::BytesToHexString(x.token_sha256());
        d.b_sha256 = absl::BytesToHexString(y.token_sha256());
        const std::set<std::vector<uint64_t>> sx = Samples(x), sy = Samples(y);
        std::set_difference(sx.begin(), sx.end(), sy.begin(), sy.end(),
                            std::back_inserter(d.only_in_a));
        std::set_difference(sy.begin(), sy.end(), sx.begin(), sx.end(),
                            std::back_inserter(d.only_in_b));
        report.first_difference = std::move(d);
      }
    }
    if (differs) ++report.differing_steps;
  }
  for (uint64_t step : in_b) {
    if (!in_a.count(step) && report.only_b.size() < kListedSteps) report.only_b.push_back(step);
  }
  return report;
}

}  // namespace zephon::audit
