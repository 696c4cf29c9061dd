#include "daemon/checkpoint/local_rounds.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/checkpoint/dataset_content.h"

namespace zephon::checkpoint {

std::string FormatRanks(const std::set<uint32_t>& ranks) {
  std::vector<std::string> parts;
  for (auto it = ranks.begin(); it != ranks.end();) {
    const uint32_t first = *it;
    uint32_t last = first;
    ++it;
    while (it != ranks.end() && *it == last + 1) last = *it++;
    parts.push_back(first == last ? absl::StrCat(first) : absl::StrCat(first, "-", last));
  }
  return absl::StrJoin(parts, ",");
}

LocalRounds::LocalRounds(LocalRoundsOptions options) : options_(std::move(options)) {
  if (options_.roster == nullptr || options_.reporter == nullptr ||
      options_.counters == nullptr) {
    std::abort();  // a programming error: see LocalRoundsOptions
  }
}

absl::StatusOr<proto::CheckpointReport> LocalRounds::PreMerge(
    const std::map<uint32_t, RoundCall>& calls, const std::string& run_id,
    uint64_t round) const {
  proto::CheckpointReport report;
  report.set_run_id(run_id);
  report.set_round(round);
  report.set_daemon(options_.daemon_label);
  // Readers of one instance are peers of one DP group: they must have taken alike.
  std::map<std::string, std::vector<const RoundCall*>> by_instance;
  for (const auto& [rank, call] : calls) by_instance[call.instance->instance_id].push_back(&call);
  for (const auto& [instance_id, members] : by_instance) {
    const RoundInstance& instance = *members.front()->instance;
    const uint64_t n = members.front()->taken;
    for (const RoundCall* c : members) {
      if (c->taken != n) {
        std::vector<std::string> counts;
        for (const RoundCall* m : members) {
          counts.push_back(absl::StrCat("rank ", m->global_rank, " took ", m->taken));
        }
        return absl::FailedPreconditionError(absl::StrCat(
            "checkpoint round ", round, " of run ", run_id, ": DP group ",
            instance.dp_group_id, " peers disagree (",
            absl::StrJoin(counts, ", "),
            " batches) — did every rank call checkpoint() at the same step?"));
      }
    }
    ASSIGN_OR_RETURN(std::vector<proto::LaneProgress> lanes,
                     instance.progress->ProgressAfter(n));
    for (auto& lane : lanes) *report.add_lanes() = std::move(lane);
    report.set_world_size(instance.world_size);
    report.set_canonical_replicas(instance.canonical_replicas);
    report.set_spec_hash(instance.spec_hash);
    report.set_seed(instance.spec.work_source().seed());
    *report.mutable_spec() = instance.spec;
    *report.mutable_schedule_history() = {instance.schedule_history.begin(),
                                          instance.schedule_history.end()};
    *report.mutable_lineage() = {instance.lineage.begin(), instance.lineage.end()};
    if (report.datasets_size() == 0) {
      // Every instance of the run has the same spec hash, hence the same files: one
      // description serves the report (cached per dataset after the first round).
      ASSIGN_OR_RETURN(std::vector<proto::DatasetContent> contents,
                       DescribeDatasets(instance.datasets,
                                        instance.spec.work_source().weight_by()));
      for (auto& d : contents) *report.add_datasets() = std::move(d);
    }
    report.set_aggregate_dir(instance.route.aggregate_dir);
    report.set_aggregate_timeout_s(instance.aggregate_timeout_s);
    for (const RoundCall* c : members) {
      proto::RankProgress* rp = report.add_ranks();
      rp->set_global_rank(c->global_rank);
      rp->set_dp_degree(instance.dp_degree);
      rp->set_dp_group_id(instance.dp_group_id);
      rp->set_taken(c->taken);
      rp->set_instance_id(instance.instance_id);
      rp->set_daemon(options_.daemon_label);
    }
  }
  return report;
}

void LocalRounds::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  for (auto& [key, round] : rounds_) {
    if (round.submitting == 0 && !round.result.has_value()) {
      round.result = absl::UnavailableError(absl::StrCat(
          "checkpoint round ", key.second, " of run ", key.first, ": zephond (",
          options_.daemon_label, ") is shutting down"));
    }
  }
}

absl::StatusOr<proto::CheckpointResult> LocalRounds::Participate(RoundCall call,
                                                                 absl::Time deadline) {
  const Key key(call.run_id, call.round);
  const uint32_t rank = call.global_rank;
  absl::MutexLock lock(&mu_);
  if (shut_down_) {
    return absl::UnavailableError(absl::StrCat("zephond (", options_.daemon_label,
                                               ") is shutting down"));
  }
  if (auto failed = failed_rounds_.find(key);
      failed != failed_rounds_.end() &&
      failed->second.instance_ids.count(call.instance->instance_id) > 0) {
    const absl::Status& status = failed->second.status;
    return absl::Status(status.code(),
                        absl::StrCat(status.message(), " [rank ", rank,
                                     " called checkpoint() for this round after it had "
                                     "failed; its next call starts a new round]"));
  }
  Round& round = rounds_[key];
  if (round.calls.empty() && !round.result.has_value()) {
    round.deadline = deadline;
    round.started = options_.env->Now();
  }
  if (round.result.has_value()) return *round.result;  // a late duplicate: same answer
  if (!round.calls.emplace(rank, std::move(call)).second) {
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank, " called checkpoint() twice for round ", key.second, " of run ",
        key.first));
  }
  ++round.waiters;
  auto done = [&round]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return round.result.has_value();
  };
  auto reported_or_done = [&round, rank]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return round.result.has_value() || round.reported.count(rank) > 0;
  };
  // The local set is read each time, not fixed at the round's first call: a rank
  // attached since then is waited for, and one that attaches after a report went out
  // sends its own report when it calls (the leader waits for every rank of world_size).
  auto missing_now = [this, &round, &key]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::set<uint32_t> missing;
    for (uint32_t r : options_.roster->LocalRanksOfRun(key.first)) {
      if (round.calls.count(r) == 0) missing.insert(r);
    }
    return missing;
  };
  while (!round.result.has_value() && round.reported.count(rank) == 0) {
    if (missing_now().empty()) {
      // This caller completes the local set: it pre-merges and reports every call not
      // reported yet, its own included, and waits for the leader's answer.
      const bool first_report = round.reported.empty();
      std::map<uint32_t, RoundCall> unreported;
      for (const auto& [r, c] : round.calls) {
        if (round.reported.insert(r).second) unreported.emplace(r, c);
      }
      ++round.submitting;
      const absl::Time round_deadline = round.deadline;
      mu_.Unlock();
      absl::StatusOr<proto::CheckpointResult> result =
          Submit(unreported, key, round_deadline, first_report);
      mu_.Lock();
      --round.submitting;
      // Reports of one round get one outcome from the leader; the first one answers.
      if (!round.result.has_value()) round.result = std::move(result);
      break;
    }
    if (!mu_.AwaitWithTimeout(absl::Condition(&reported_or_done),
                              round.deadline - options_.env->Now()) &&
        !reported_or_done()) {
      // Named at the deadline: ranks that called while this one waited are not missing.
      round.result = absl::DeadlineExceededError(absl::StrCat(
          "checkpoint round ", key.second, " of run ", key.first, ": ranks [",
          FormatRanks(missing_now()), "] attached to this zephond (", options_.daemon_label,
          ") did not call checkpoint() in time — did every rank call checkpoint() at the "
          "same step?"));
    }
  }
  if (!round.result.has_value()) {
    // Another caller reported this one and is talking to the leader under the round's
    // deadline: wait for its answer (the margin only guards against a submitter that
    // never comes back), and never answer differently from it.
    if (!mu_.AwaitWithTimeout(absl::Condition(&done),
                              round.deadline + absl::Seconds(30) - options_.env->Now())) {
      --round.waiters;
      return absl::DeadlineExceededError(absl::StrCat(
          "checkpoint round ", key.second, " of run ", key.first,
          ": no answer from the run's leader in time"));
    }
  }
  absl::StatusOr<proto::CheckpointResult> out = *round.result;
  if (--round.waiters == 0) {
    // The round's one outcome here, counted once, by its last waiter.
    using Result = metrics::DaemonCounters::RoundResult;
    options_.counters->CountCheckpointRound(
        {key.first, key.second,
         out.ok() ? Result::kOk
         : absl::IsDeadlineExceeded(out.status()) ? Result::kTimeout
                                                  : Result::kError,
         round.started, options_.env->Now(),
         out.ok() ? std::string() : std::string(out.status().message())});
    if (!out.ok()) {
      Failure failure{out.status(), {}};
      for (const auto& [r, c] : round.calls) failure.instance_ids.insert(c.instance->instance_id);
      RememberFailure(key, std::move(failure));
    }
    rounds_.erase(key);
  }
  return out;
}

void LocalRounds::RememberFailure(const Key& key, Failure failure) {
  // A new instance's round of the same number replaces the older failure.
  if (auto it = failed_rounds_.find(key); it != failed_rounds_.end()) {
    it->second = std::move(failure);
    return;
  }
  failed_rounds_.emplace(key, std::move(failure));
  failed_order_.push_back(key);
  if (failed_order_.size() > kRememberedFailures) {
    failed_rounds_.erase(failed_order_.front());
    failed_order_.pop_front();
  }
}

absl::StatusOr<proto::CheckpointResult> LocalRounds::Submit(
    const std::map<uint32_t, RoundCall>& calls, const Key& key, absl::Time deadline,
    bool counted) const {
  const RoundInstance& instance = *calls.begin()->second.instance;
  // Rank 0 may be attached here without being in this report (it called first and was
  // reported already, or has not called yet): this daemon still leads.
  const bool leads =
      calls.count(0) > 0 || options_.roster->LocalRanksOfRun(key.first).count(0) > 0;
  absl::StatusOr<proto::CheckpointReport> report = PreMerge(calls, key.first, key.second);
  if (report.ok()) return Report(*report, instance.route, leads, deadline, counted);
  // Broken here (e.g. peers' counts differ): tell the leader, so that ranks on other
  // nodes get the real cause now instead of a timeout later.
  proto::CheckpointReport failure;
  failure.set_run_id(key.first);
  failure.set_round(key.second);
  failure.set_daemon(options_.daemon_label);
  failure.set_aggregate_dir(instance.route.aggregate_dir);
  failure.set_aggregate_timeout_s(instance.aggregate_timeout_s);
  failure.set_failure(std::string(report.status().message()));
  (void)Report(failure, instance.route, leads,
               std::min(deadline, options_.env->Now() + absl::Seconds(5)), counted);
  return report.status();
}

absl::StatusOr<proto::CheckpointResult> LocalRounds::Report(
    const proto::CheckpointReport& report, const LeaderRoute& route, bool leads,
    absl::Time deadline, bool counted) const {
  const absl::Time begun = options_.env->Now();
  absl::StatusOr<proto::CheckpointResult> result =
      options_.reporter->Submit(report, route, leads, deadline);
  if (!counted) return result;
  options_.counters->ObserveRoundSeconds(absl::ToDoubleSeconds(options_.env->Now() - begun));
  return result;
}

}  // namespace zephon::checkpoint
