#include "daemon/checkpoint/round_state.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"

namespace zephon::checkpoint {
namespace {

std::string DaemonName(const std::string& daemon) {
  return daemon.empty() ? "(unnamed daemon)" : daemon;
}

std::string Serialize(const proto::CheckpointReport& report) {
  std::string out;
  google::protobuf::io::StringOutputStream stream(&out);
  google::protobuf::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  report.SerializeToCodedStream(&coded);
  return out;
}

bool SameProgress(const proto::LaneProgress& a, const proto::LaneProgress& b) {
  return a.next_batch_index() == b.next_batch_index() &&
         a.flush_group_chunk() == b.flush_group_chunk() &&
         a.records_into_group() == b.records_into_group();
}

std::string FormatProgress(const proto::LaneProgress& p) {
  return absl::StrCat("next_batch_index ", p.next_batch_index(), ", flush_group_chunk ",
                      p.flush_group_chunk(), ", records_into_group ", p.records_into_group());
}

// The first header field where `b` differs from `a`, if any.
struct FieldDiff {
  std::string name;
  std::string a_value;
  std::string b_value;
};
std::optional<FieldDiff> DifferentHeaderField(const proto::CheckpointReport& a,
                                              const proto::CheckpointReport& b) {
  auto diff = [](std::string name, const auto& x, const auto& y) {
    return FieldDiff{std::move(name), absl::StrCat(x), absl::StrCat(y)};
  };
  if (a.run_id() != b.run_id()) return diff("run_id", a.run_id(), b.run_id());
  if (a.round() != b.round()) return diff("round", a.round(), b.round());
  if (a.world_size() != b.world_size()) return diff("world_size", a.world_size(), b.world_size());
  if (a.canonical_replicas() != b.canonical_replicas()) {
    return diff("canonical_replicas", a.canonical_replicas(), b.canonical_replicas());
  }
  if (a.spec_hash() != b.spec_hash()) return diff("spec_hash", a.spec_hash(), b.spec_hash());
  if (a.seed() != b.seed()) return diff("seed", a.seed(), b.seed());
  if (a.aggregate_dir() != b.aggregate_dir()) {
    return diff("aggregate_dir", a.aggregate_dir(), b.aggregate_dir());
  }
  return std::nullopt;
}

}  // namespace

std::string FormatIdRanges(const std::vector<uint32_t>& ids) {
  std::string out;
  for (size_t i = 0; i < ids.size();) {
    size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    if (!out.empty()) out += ",";
    absl::StrAppend(&out, ids[i]);
    if (j > i) absl::StrAppend(&out, "-", ids[j]);
    i = j + 1;
  }
  return out;
}

std::string RoundState::Describe() const {
  return absl::StrCat("checkpoint round ", first_.round(), " of run ", first_.run_id());
}

absl::Status RoundState::CheckHeader(const proto::CheckpointReport& report) const {
  const std::string who = DaemonName(report.daemon());
  if (report.world_size() == 0 || report.canonical_replicas() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint round ", report.round(), " of run ", report.run_id(), ": daemon ", who,
        " reports world_size ", report.world_size(), ", canonical_replicas ",
        report.canonical_replicas(), " (both must be >= 1)"));
  }
  if (report.ranks().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint round ", report.round(),
                                                   " of run ", report.run_id(), ": daemon ",
                                                   who, " sent a report with no ranks"));
  }
  if (reports_.empty()) return absl::OkStatus();
  const std::optional<FieldDiff> diff = DifferentHeaderField(first_, report);
  if (!diff.has_value()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      Describe(), ": reports disagree on ", diff->name, ": daemon ", who, " says '",
      diff->b_value, "' but ", DaemonName(first_.daemon()), " says '", diff->a_value, "'"));
}

absl::Status RoundState::CheckRanks(const proto::CheckpointReport& report) const {
  const std::string who = DaemonName(report.daemon());
  // Entries of this report, checked against each other as well as against the round.
  std::map<uint32_t, const proto::RankProgress*> mine;
  std::map<std::pair<uint32_t, uint32_t>, const proto::RankProgress*> my_groups;
  uint32_t dp_degree = ranks_.empty() ? 0 : ranks_.begin()->second.dp_degree();
  uint32_t dp_degree_rank = ranks_.empty() ? 0 : ranks_.begin()->first;
  for (const proto::RankProgress& r : report.ranks()) {
    const uint32_t rank = r.global_rank();
    if (rank >= report.world_size()) {
      return absl::InvalidArgumentError(absl::StrCat(Describe(), ": daemon ", who,
                                                     " reports rank ", rank,
                                                     ", outside world_size ",
                                                     report.world_size()));
    }
    if (r.dp_degree() == 0 || r.dp_group_id() >= r.dp_degree()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Describe(), ": rank ", rank, " on ", who, " has dp_group_id ",
                       r.dp_group_id(), " with dp_degree ", r.dp_degree()));
    }
    if (auto it = ranks_.find(rank); it != ranks_.end() || mine.count(rank) > 0) {
      const std::string other = it != ranks_.end() ? DaemonName(it->second.daemon()) : who;
      return absl::FailedPreconditionError(absl::StrCat(
          Describe(), ": rank ", rank, " reported twice (by ", other, " and ", who,
          "): is the same global_rank used by two processes?"));
    }
    mine[rank] = &r;
    if (dp_degree == 0) {
      dp_degree = r.dp_degree();
      dp_degree_rank = rank;
    } else if (r.dp_degree() != dp_degree) {
      return absl::FailedPreconditionError(absl::StrCat(
          Describe(), ": ranks disagree on dp_degree: rank ", dp_degree_rank, " has ",
          dp_degree, " but rank ", rank, " (on ", who, ") has ", r.dp_degree()));
    }
    const std::pair<uint32_t, uint32_t> group{r.dp_degree(), r.dp_group_id()};
    uint32_t peer = 0;
    uint64_t peer_taken = 0;
    std::string peer_daemon;
    if (auto g = groups_.find(group); g != groups_.end()) {
      peer = g->second.rank;
      peer_taken = g->second.taken;
      peer_daemon = DaemonName(ranks_.at(peer).daemon());
    } else if (auto m = my_groups.find(group); m != my_groups.end()) {
      peer = m->second->global_rank();
      peer_taken = m->second->taken();
      peer_daemon = who;
    } else {
      my_groups[group] = &r;
      continue;
    }
    if (peer_taken != r.taken()) {
      return absl::FailedPreconditionError(absl::StrCat(
          Describe(), ": DP group ", r.dp_group_id(), ": rank ", peer, " took ",
          peer_taken, " batches but rank ", rank, " took ", r.taken(),
          " — did every rank call checkpoint() at the same step? (rank ", peer, " on ",
          peer_daemon, ", rank ", rank, " on ", who, ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status RoundState::CheckLanes(const proto::CheckpointReport& report) const {
  const std::string who = DaemonName(report.daemon());
  std::map<uint32_t, const proto::LaneProgress*> mine;
  for (const proto::LaneProgress& l : report.lanes()) {
    if (l.lane() >= report.canonical_replicas()) {
      return absl::InvalidArgumentError(absl::StrCat(
          Describe(), ": daemon ", who, " reports lane ", l.lane(),
          ", outside canonical_replicas ", report.canonical_replicas()));
    }
    const proto::LaneProgress* seen = nullptr;
    std::string seen_by;
    if (auto it = lanes_.find(l.lane()); it != lanes_.end()) {
      seen = &it->second.progress;
      seen_by = DaemonName(it->second.daemon);
    } else if (auto m = mine.find(l.lane()); m != mine.end()) {
      seen = m->second;
      seen_by = who;
    }
    if (seen != nullptr && !SameProgress(*seen, l)) {
      return absl::FailedPreconditionError(absl::StrCat(
          Describe(), ": lane ", l.lane(), " reported with different progress by ", seen_by,
          " (", FormatProgress(*seen), ") and ", who, " (", FormatProgress(l),
          "): do two DP groups claim lane ", l.lane(), ", or did peers stop at different steps?"));
    }
    mine[l.lane()] = &l;
  }
  return absl::OkStatus();
}

absl::Status RoundState::Apply(const proto::CheckpointReport& report) {
  if (Contains(report)) return absl::OkStatus();
  if (absl::Status s = CheckHeader(report); !s.ok()) return s;
  if (reports_.empty()) {
    first_ = report;
    first_.clear_ranks();
    first_.clear_lanes();
  }
  if (absl::Status s = CheckRanks(report); !s.ok()) return s;
  if (absl::Status s = CheckLanes(report); !s.ok()) return s;
  for (proto::RankProgress r : report.ranks()) {
    if (r.daemon().empty()) r.set_daemon(report.daemon());
    groups_.try_emplace({r.dp_degree(), r.dp_group_id()},
                        GroupEntry{r.global_rank(), r.taken()});
    ranks_[r.global_rank()] = std::move(r);
  }
  for (const proto::LaneProgress& l : report.lanes()) {
    lanes_.try_emplace(l.lane(), LaneEntry{l, report.daemon()});
  }
  reports_.push_back(Serialize(report));
  return absl::OkStatus();
}

bool RoundState::Contains(const proto::CheckpointReport& report) const {
  if (reports_.empty()) return false;
  const std::string bytes = Serialize(report);
  for (const std::string& r : reports_) {
    if (r == bytes) return true;
  }
  return false;
}

absl::Status RoundState::CheckConsistent(const proto::CheckpointReport& report) const {
  if (Contains(report)) return absl::OkStatus();
  const std::string who = DaemonName(report.daemon());
  auto restarted = [&](const std::string& what) {
    return absl::FailedPreconditionError(absl::StrCat(
        Describe(), " already completed, and daemon ", who, "'s late report differs: ", what,
        ". Was the run restarted under the same run_id without restore()? Use a new "
        "run_id, or restore() from the last checkpoint."));
  };
  if (const std::optional<FieldDiff> diff = DifferentHeaderField(first_, report)) {
    return restarted(absl::StrCat(diff->name, " '", diff->b_value, "' instead of '",
                                  diff->a_value, "'"));
  }
  for (const proto::RankProgress& r : report.ranks()) {
    auto it = ranks_.find(r.global_rank());
    if (it == ranks_.end() || it->second.taken() != r.taken() ||
        it->second.dp_degree() != r.dp_degree() || it->second.dp_group_id() != r.dp_group_id()) {
      return restarted(absl::StrCat("rank ", r.global_rank(), " took ", r.taken()));
    }
  }
  for (const proto::LaneProgress& l : report.lanes()) {
    auto it = lanes_.find(l.lane());
    if (it == lanes_.end() || !SameProgress(it->second.progress, l)) {
      return restarted(absl::StrCat("lane ", l.lane(), " at ", FormatProgress(l)));
    }
  }
  return absl::OkStatus();
}

bool RoundState::IsComplete() const {
  return !reports_.empty() && ranks_.size() == first_.world_size() &&
         lanes_.size() == first_.canonical_replicas();
}

std::vector<uint32_t> RoundState::MissingRanks() const {
  std::vector<uint32_t> out;
  for (uint32_t r = 0; r < first_.world_size(); ++r) {
    if (ranks_.count(r) == 0) out.push_back(r);
  }
  return out;
}

std::vector<uint32_t> RoundState::MissingLanes() const {
  std::vector<uint32_t> out;
  for (uint32_t l = 0; l < first_.canonical_replicas(); ++l) {
    if (lanes_.count(l) == 0) out.push_back(l);
  }
  return out;
}

std::string RoundState::DescribeReporters() const {
  std::map<std::string, std::vector<uint32_t>> by_daemon;
  for (const auto& [rank, r] : ranks_) by_daemon[DaemonName(r.daemon())].push_back(rank);
  std::vector<std::string> parts;
  for (const auto& [daemon, ranks] : by_daemon) {
    parts.push_back(absl::StrCat(daemon, " (ranks ", FormatIdRanges(ranks), ")"));
  }
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

proto::CheckpointState RoundState::Merge(int64_t created_unix_ms) const {
  proto::CheckpointState state;
  state.set_format_version(kCheckpointFormatVersion);
  state.set_run_id(first_.run_id());
  state.set_spec_hash(first_.spec_hash());
  state.set_canonical_replicas(first_.canonical_replicas());
  state.set_seed(first_.seed());
  *state.mutable_spec() = first_.spec();
  *state.mutable_datasets() = first_.datasets();
  *state.mutable_schedule_history() = first_.schedule_history();
  *state.mutable_lineage() = first_.lineage();
  state.set_round(first_.round());
  state.set_world_size(first_.world_size());
  state.set_created_unix_ms(created_unix_ms);
  uint64_t total = 0;
  for (const auto& [lane, entry] : lanes_) {
    *state.add_lanes() = entry.progress;
    total += entry.progress.next_batch_index();
  }
  for (const auto& [rank, r] : ranks_) *state.add_ranks() = r;
  state.set_dp_degree(ranks_.empty() ? 0 : ranks_.begin()->second.dp_degree());
  state.set_total_batches(total);
  return state;
}

}  // namespace zephon::checkpoint
