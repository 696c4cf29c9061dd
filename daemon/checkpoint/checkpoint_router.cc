#include "daemon/checkpoint/checkpoint_router.h"

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "daemon/checkpoint/aggregate_dir.h"
#include "daemon/checkpoint/peer_service.h"

namespace zephon::checkpoint {
namespace {

// A leader found dead may be replaced (a restarted rank 0 rewrites the rendezvous file):
// look for a new address this long before giving up.
constexpr absl::Duration kNewLeaderGrace = absl::Seconds(5);
constexpr absl::Duration kRendezvousPoll = absl::Milliseconds(100);
constexpr int kSameLeaderAttempts = 4;
constexpr absl::Duration kRetryPause = absl::Milliseconds(250);
constexpr size_t kMaxCachedClients = 16;
constexpr size_t kMaxKnownLeaders = 1024;  // runs this daemon checkpointed recently
constexpr absl::Duration kKnownLeaderReadBudget = absl::Seconds(5);

// Errors of the rendezvous read that may clear up by waiting: the leader has not written
// the file yet, or the store is briefly unreachable. Anything else (refused credentials,
// a missing bucket, a damaged file) will not, and is reported at once.
bool WorthPolling(const absl::Status& s) {
  return absl::IsNotFound(s) || absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s);
}

}  // namespace

bool CheckpointRouter::NamesThisDaemon(const LeaderRecord& leader) const {
  if (!own_instance_.empty() && leader.instance == own_instance_) return true;
  // By address: this process, or an earlier process of this daemon at the same address
  // whose file rank 0's attach here will rewrite (wait for it; the deadline bounds it).
  if (!own_address_.empty()) return leader.address == own_address_;
  if (!leader.address.empty()) return false;  // A daemon that serves peers leads.
  // Neither serves peers. A file of an older zephond (no instance line) cannot be told
  // apart: waiting ends at the deadline with the last read's message. Otherwise, an
  // earlier process of this daemon wrote the same label on the same host; any other
  // daemon (the same socket path on another node) leads elsewhere.
  if (leader.instance.empty()) return true;
  return leader.daemon == own_label_ && !leader.host.empty() && leader.host == own_host_;
}

absl::StatusOr<std::string> CheckpointRouter::FindLeader(const LeaderRoute& route,
                                                         absl::Time deadline,
                                                         const std::string& not_this) const {
  if (!route.leader_address.empty()) return route.leader_address;
  if (route.aggregate_dir.empty()) {
    return absl::FailedPreconditionError(
        "this run has no aggregate_dir and no leader_address: the daemon of global_rank 0 "
        "cannot be found");
  }
  const std::string cache_key = absl::StrCat(route.aggregate_dir, "\n", route.run_id);
  bool known = false;
  {
    absl::MutexLock lock(&mu_);
    auto it = known_leaders_.find(cache_key);
    known = it != known_leaders_.end() && it->second != not_this;
  }
  auto leads_now = [&] { return leads_run_ != nullptr && leads_run_(route.run_id); };
  absl::Status last;
  while (true) {
    if (leads_now()) return std::string();
    // Every read is bounded by what is left of the deadline; with a leader to fall back
    // on, by kKnownLeaderReadBudget, so a hanging store leaves time for the report.
    absl::Duration budget = std::max(deadline - env_->Now(), absl::Seconds(1));
    if (known) budget = std::min(budget, kKnownLeaderReadBudget);
    ASSIGN_OR_RETURN(std::unique_ptr<AggregateDir> aggregate,
                     AggregateDir::Open(route.aggregate_dir, s3_, budget, env_));
    absl::StatusOr<LeaderRecord> leader = aggregate->ReadLeaderRecord(route.run_id);
    // The file names this daemon: rank 0 is attaching here and not registered yet. Wait
    // for it instead of reporting to ourselves or failing.
    if (leads_run_ != nullptr && leader.ok() && NamesThisDaemon(*leader)) {
      last = absl::UnavailableError(absl::StrCat(
          "the leader file names this zephond (",
          leader->address.empty() ? leader->daemon : leader->address,
          ") but global_rank 0 of the run is not attached here"));
      if (env_->Now() + kRendezvousPoll > deadline) break;
      env_->SleepFor(kRendezvousPoll);
      continue;
    }
    // Another daemon leads without a peer service: waiting cannot fix that.
    const absl::StatusOr<std::string> address =
        !leader.ok()                ? absl::StatusOr<std::string>(leader.status())
        : leader->address.empty()   ? absl::StatusOr<std::string>(
                                        NoPeerServiceError(route.run_id, *leader))
                                    : absl::StatusOr<std::string>(leader->address);
    if (address.ok() && *address != not_this) {
      absl::MutexLock lock(&mu_);
      if (known_leaders_.size() >= kMaxKnownLeaders) known_leaders_.clear();
      known_leaders_[cache_key] = *address;
      return address;
    }
    if (!address.ok() && !absl::IsNotFound(address.status()) &&
        WorthPolling(address.status())) {
      // The store is unreachable (an object store outage): the leader found by an
      // earlier round still leads unless it stops answering, so keep checkpointing.
      absl::MutexLock lock(&mu_);
      auto it = known_leaders_.find(cache_key);
      if (it != known_leaders_.end() && it->second != not_this) {
        SubsystemLogger("checkpoint")->warn(
            "run={} rank={}: cannot read the rendezvous file ({}); using the last known "
            "leader {}",
            route.run_id, route.global_rank, address.status().ToString(), it->second);
        return it->second;
      }
    }
    if (!address.ok() && !WorthPolling(address.status())) {
      return absl::Status(address.status().code(),
                          absl::StrCat("cannot find the leader of run ", route.run_id,
                                       ": ", address.status().message()));
    }
    last = address.ok() ? absl::UnavailableError(absl::StrCat(
                              "the leader recorded in the rendezvous file (", *address,
                              ") is unreachable"))
                        : address.status();
    if (env_->Now() + kRendezvousPoll > deadline) break;
    env_->SleepFor(kRendezvousPoll);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "cannot reach the leader of run ", route.run_id, " (the zephond hosting global_rank "
      "0): ", last.message()));
}

absl::StatusOr<std::shared_ptr<const PeerClient>> CheckpointRouter::ClientFor(
    const std::string& address) const {
  absl::MutexLock lock(&mu_);
  auto it = clients_.find(address);
  if (it != clients_.end()) return it->second;
  ASSIGN_OR_RETURN(std::unique_ptr<PeerClient> client,
                   PeerClient::Connect(address, credentials_, auth_));
  // A run has one leader at a time; a handful of past ones is plenty to remember.
  if (clients_.size() >= kMaxCachedClients) clients_.clear();
  std::shared_ptr<const PeerClient> shared = std::move(client);
  clients_.emplace(address, shared);
  return shared;
}

absl::StatusOr<proto::CheckpointResult> CheckpointRouter::Submit(
    const proto::CheckpointReport& report, const LeaderRoute& route, bool leads,
    absl::Time deadline) const {
  if (leads) return aggregator_->Submit(report, deadline);
  std::string dead;
  while (true) {
    const absl::Time find_by =
        dead.empty() ? deadline : std::min(deadline, env_->Now() + kNewLeaderGrace);
    absl::StatusOr<std::string> address = FindLeader(route, find_by, dead);
    if (address.ok() && address->empty()) return aggregator_->Submit(report, deadline);
    if (!address.ok()) {
      if (!dead.empty()) {
        return absl::UnavailableError(absl::StrCat(
            "checkpoint round ", report.round(), " of run ", report.run_id(),
            ": the leader zephond at ", dead, " stopped answering (no new leader appeared)"));
      }
      return address.status();
    }
    absl::StatusOr<std::shared_ptr<const PeerClient>> client = ClientFor(*address);
    if (!client.ok()) return client.status();
    // A brief connection failure is not a dead leader: retry the same address a few
    // times before looking for another one.
    absl::StatusOr<proto::CheckpointResult> result = (*client)->Report(report, deadline);
    for (int attempt = 1; attempt < kSameLeaderAttempts && absl::IsUnavailable(result.status()) &&
                          env_->Now() + kRetryPause < deadline;
         ++attempt) {
      env_->SleepFor(kRetryPause);
      result = (*client)->Report(report, deadline);
    }
    if (result.ok() || !absl::IsUnavailable(result.status()) || !route.leader_address.empty()) {
      return result;
    }
    SubsystemLogger("checkpoint")->warn(
        "run={} rank={} round {}: leader {} unreachable (trying the rendezvous again): {}",
        report.run_id(), route.global_rank, report.round(), *address,
        result.status().ToString());
    dead = *address;
    // Its channel may sit in gRPC's reconnect backoff for minutes: a leader that comes
    // back at this address must get a fresh channel.
    absl::MutexLock lock(&mu_);
    clients_.erase(dead);
  }
}

}  // namespace zephon::checkpoint
