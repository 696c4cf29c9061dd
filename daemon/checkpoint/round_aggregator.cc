#include "daemon/checkpoint/round_aggregator.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "daemon/checkpoint/aggregate_dir.h"
#include "daemon/checkpoint/mid_window.h"
#include "daemon/checkpoint/round_state.h"

namespace zephon::checkpoint {

namespace {

std::string DescribeRound(const std::string& run_id, uint64_t round) {
  return absl::StrCat("checkpoint round ", round, " of run ", run_id);
}

std::string Seconds(absl::Duration d) {
  return absl::StrFormat("%g s", absl::ToDoubleSeconds(d));
}

// Runs a leader remembers having warned of a mid-window checkpoint: past this many, it
// forgets them all (a run may then be warned once more).
constexpr size_t kMaxWarnedRuns = 4096;

constexpr char kSameStepHint[] = "(did every rank call checkpoint() at the same step?)";

}  // namespace

// Every field is guarded by RoundAggregator::mu_ (the struct is private to it). Shared
// ownership: a waiting Submit keeps its round alive even if the round is dropped from
// runs_ meanwhile.
struct RoundAggregator::Round {
  enum class Phase { kCollecting, kWriting, kDone };

  Round(std::string run, uint64_t n) : run_id(std::move(run)), number(n) {}
  std::string Describe() const { return DescribeRound(run_id, number); }

  const std::string run_id;
  const uint64_t number;
  RoundState state;
  absl::Time started_at;
  absl::Duration timeout;
  absl::Time deadline;  // started_at + timeout
  Phase phase = Phase::kCollecting;
  absl::StatusOr<proto::CheckpointResult> outcome = absl::UnknownError("pending");
  absl::Time finished_at = absl::InfinitePast();
  absl::CondVar cv;  // signalled when phase becomes kDone
};

RoundAggregator::RoundAggregator(RoundAggregatorOptions options)
    : options_(std::move(options)) {}

RoundAggregator::~RoundAggregator() { Shutdown(); }

absl::Duration RoundAggregator::TimeoutOf(const proto::CheckpointReport& report) const {
  const double s = report.aggregate_timeout_s();
  if (!(s > 0)) return options_.default_timeout;  // also NaN
  if (s >= absl::ToDoubleSeconds(options_.max_timeout)) return options_.max_timeout;
  return absl::Seconds(s);
}

absl::StatusOr<proto::CheckpointResult> RoundAggregator::Submit(
    const proto::CheckpointReport& report, absl::Time deadline,
    const std::function<bool()>& cancelled) {
  const std::string what = DescribeRound(report.run_id(), report.round());
  if (report.run_id().empty()) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the report has no run_id"));
  }
  if (!report.aggregate_dir().empty()) {
    if (absl::Status s = ValidateRunLocation(report.aggregate_dir(), report.run_id()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": ", s.message()));
    }
  }
  absl::MutexLock lock(&mu_);
  if (!shutdown_.ok()) {
    return absl::Status(shutdown_.code(), absl::StrCat(what, ": ", shutdown_.message()));
  }
  const absl::Time now = options_.env->Now();
  CollectGarbage(now);
  std::shared_ptr<Round>& slot = runs_[report.run_id()].rounds[report.round()];
  if (slot == nullptr) {
    slot = std::make_shared<Round>(report.run_id(), report.round());
    slot->started_at = now;
    slot->timeout = TimeoutOf(report);
    slot->deadline = now + slot->timeout;
  }
  const std::shared_ptr<Round> round = slot;
  switch (round->phase) {
    case Round::Phase::kDone:
      return OutcomeFor(*round, report);
    case Round::Phase::kWriting:
      if (absl::Status s = round->state.CheckConsistent(report); !s.ok()) return s;
      break;
    case Round::Phase::kCollecting:
      if (!report.failure().empty()) {  // a daemon found the round broken: fail it for all
        Finish(round.get(), absl::FailedPreconditionError(report.failure()));
        return round->outcome.status();
      }
      if (absl::Status s = round->state.Apply(report); !s.ok()) {
        Finish(round.get(), s);
        return s;
      }
      if (round->state.IsComplete()) Complete(round.get());
      break;
  }
  while (round->phase != Round::Phase::kDone) {
    const absl::Time t = options_.env->Now();
    if (round->phase == Round::Phase::kCollecting) {
      if (t >= round->deadline) {
        Finish(round.get(), TimeoutError(*round));
        break;
      }
      const bool was_cancelled = cancelled != nullptr && cancelled();
      if (was_cancelled || t >= deadline) {
        Finish(round.get(), AbandonedError(*round, report, was_cancelled));
        break;
      }
    } else if (t >= deadline) {
      // Writing: the round is complete and cannot be failed any more; only this caller
      // stops waiting for the write to finish.
      return absl::DeadlineExceededError(absl::StrCat(
          what, ": the caller's deadline passed while the leader was still writing the "
                "merged checkpoint"));
    }
    absl::Time wake = std::min(round->deadline, deadline);
    if (cancelled != nullptr) wake = std::min(wake, t + options_.poll_interval);
    // A timeout, not a deadline: `wake` is on env's clock, the CondVar's is real.
    round->cv.WaitWithTimeout(&mu_, wake - t);
  }
  return OutcomeFor(*round, report);
}

void RoundAggregator::Complete(Round* round) {
  const proto::CheckpointState state =
      round->state.Merge(absl::ToUnixMillis(options_.env->Now()));
  std::string bytes = EncodeCheckpoint(state);
  round->phase = Round::Phase::kWriting;
  const std::string dir = round->state.aggregate_dir();
  absl::StatusOr<std::string> path = std::string();
  if (!dir.empty()) {
    // Other rounds proceed while this one writes; its submitters keep waiting.
    mu_.Unlock();
    absl::StatusOr<std::unique_ptr<AggregateDir>> agg =
        AggregateDir::Open(dir, options_.s3, absl::InfiniteDuration(), options_.env);
    path = agg.ok() ? (*agg)->WriteCheckpoint(round->run_id, round->number, bytes)
                    : absl::StatusOr<std::string>(agg.status());
    mu_.Lock();
  }
  if (path.ok() && options_.on_complete) {
    mu_.Unlock();
    options_.on_complete(state, dir);
    mu_.Lock();
  }
  if (!path.ok()) {
    // The store being unreachable fails the round; it must not read as UNAVAILABLE, which
    // followers take to mean "the leader itself is unreachable, look for another one".
    const absl::StatusCode code = absl::IsUnavailable(path.status())
                                      ? absl::StatusCode::kAborted
                                      : path.status().code();
    Finish(round, absl::Status(code,
                               absl::StrCat(round->Describe(),
                                            ": cannot write the merged checkpoint: ",
                                            path.status().message())));
    return;
  }
  SubsystemLogger("checkpoint")
      ->info("{} complete: {} ranks, {} lanes, {} batches, {} bytes{}{}", round->Describe(),
             state.ranks_size(), state.lanes_size(), state.total_batches(), bytes.size(),
             path->empty() ? "" : " -> ", *path);
  proto::CheckpointResult result;
  result.set_checkpoint(std::move(bytes));
  result.set_path(*std::move(path));
  if (std::optional<std::string> warning = MidWindowWarning(state); warning.has_value()) {
    if (warned_mid_window_.size() >= kMaxWarnedRuns) warned_mid_window_.clear();
    if (warned_mid_window_.insert(round->run_id).second) {
      SubsystemLogger("checkpoint")->warn("{}", *warning);
      result.set_warning(*std::move(warning));
    }
  }
  Finish(round, std::move(result));
}

void RoundAggregator::Finish(Round* round, absl::StatusOr<proto::CheckpointResult> outcome) {
  if (round->phase == Round::Phase::kDone) return;
  if (!outcome.ok()) {
    SubsystemLogger("checkpoint")->warn("{}", std::string(outcome.status().message()));
  }
  round->outcome = std::move(outcome);
  round->phase = Round::Phase::kDone;
  round->finished_at = options_.env->Now();
  round->cv.SignalAll();
}

absl::StatusOr<proto::CheckpointResult> RoundAggregator::OutcomeFor(
    const Round& round, const proto::CheckpointReport& report) const {
  if (!round.outcome.ok()) return round.outcome;
  if (absl::Status s = round.state.CheckConsistent(report); !s.ok()) return s;
  return round.outcome;
}

namespace {

// "ranks [4-5]"; lanes only when every rank reported (missing ranks imply their lanes).
std::string MissingText(const RoundState& state) {
  const std::vector<uint32_t> ranks = state.MissingRanks();
  if (!ranks.empty()) return absl::StrCat("ranks [", FormatIdRanges(ranks), "]");
  return absl::StrCat("lanes [", FormatIdRanges(state.MissingLanes()),
                      "] (every rank reported, but no instance covered them)");
}

// MissingText, plus the likely cause when ranks are missing.
std::string MissingWithHint(const RoundState& state) {
  const std::string missing = MissingText(state);
  return state.MissingRanks().empty() ? missing : absl::StrCat(missing, " ", kSameStepHint);
}

}  // namespace

absl::Status RoundAggregator::TimeoutError(const Round& round) const {
  return absl::DeadlineExceededError(absl::StrCat(
      round.Describe(), ": timed out after ", Seconds(round.timeout), " waiting for ",
      MissingWithHint(round.state), "; reported: ", round.state.DescribeReporters()));
}

absl::Status RoundAggregator::AbandonedError(const Round& round,
                                             const proto::CheckpointReport& report,
                                             bool cancelled) const {
  const std::string who = report.daemon().empty() ? "(unnamed daemon)" : report.daemon();
  const std::string waited = Seconds(absl::Trunc(options_.env->Now() - round.started_at,
                                                 absl::Milliseconds(1)));
  const std::string missing = MissingText(round.state);
  if (cancelled) {
    return absl::AbortedError(absl::StrCat(
        round.Describe(), ": daemon ", who,
        " left the round (its Report was cancelled: did its zephond exit?) after ", waited,
        " while ", missing, " were missing"));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      round.Describe(), ": daemon ", who, " stopped waiting (its deadline passed) after ",
      waited, " while waiting for ", MissingWithHint(round.state)));
}

size_t RoundAggregator::ForgetRun(const std::string& run_id) {
  absl::MutexLock lock(&mu_);
  auto run = runs_.find(run_id);
  if (run == runs_.end()) return 0;
  size_t forgotten = 0;
  auto& rounds = run->second.rounds;
  for (auto it = rounds.begin(); it != rounds.end();) {
    if (it->second->phase == Round::Phase::kDone) {
      it = rounds.erase(it);  // waiting submitters hold their own reference
      ++forgotten;
    } else {
      ++it;
    }
  }
  if (rounds.empty()) runs_.erase(run);
  return forgotten;
}

void RoundAggregator::CollectGarbage(absl::Time now) {
  for (auto run = runs_.begin(); run != runs_.end();) {
    std::vector<std::pair<absl::Time, uint64_t>> finished;
    auto& rounds = run->second.rounds;
    for (auto it = rounds.begin(); it != rounds.end();) {
      Round& r = *it->second;
      if (r.phase == Round::Phase::kCollecting && now >= r.deadline) {
        Finish(&r, TimeoutError(r));  // no submitter is waiting to notice
      }
      if (r.phase == Round::Phase::kDone) {
        const absl::Duration keep = r.outcome.ok()
                                        ? options_.completed_retention
                                        : std::max(r.timeout, options_.min_failed_retention);
        if (now - r.finished_at > keep) {
          it = rounds.erase(it);
          continue;
        }
        finished.emplace_back(r.finished_at, it->first);
      }
      ++it;
    }
    if (finished.size() > options_.finished_rounds_per_run) {
      std::sort(finished.begin(), finished.end());
      for (size_t i = 0; i + options_.finished_rounds_per_run < finished.size(); ++i) {
        rounds.erase(finished[i].second);
      }
    }
    run = rounds.empty() ? runs_.erase(run) : std::next(run);
  }
}

void RoundAggregator::Shutdown() {
  absl::MutexLock lock(&mu_);
  if (!shutdown_.ok()) return;
  shutdown_ = absl::UnavailableError("the leader zephond is shutting down");
  for (auto& [run_id, run] : runs_) {
    for (auto& [number, round] : run.rounds) {
      if (round->phase == Round::Phase::kCollecting) {
        Finish(round.get(), absl::UnavailableError(absl::StrCat(
                                round->Describe(),
                                ": abandoned: the leader zephond is shutting down")));
      }
    }
  }
}

size_t RoundAggregator::pending_rounds() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [run_id, run] : runs_) {
    for (const auto& [number, round] : run.rounds) {
      if (round->phase != Round::Phase::kDone) ++n;
    }
  }
  return n;
}

}  // namespace zephon::checkpoint
