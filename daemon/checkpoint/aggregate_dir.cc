#include "daemon/checkpoint/aggregate_dir.h"

#include <unistd.h>

#include <algorithm>
#include <map>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "daemon/storage/open_store.h"
#include "common/run_id.h"

namespace zephon::checkpoint {
namespace {

constexpr char kLeaderName[] = "leader";
constexpr absl::string_view kCheckpointPrefix = "checkpoint-";
constexpr absl::string_view kCheckpointSuffix = ".zckpt";

std::string LeaderKey(const std::string& run_id) { return absl::StrCat(run_id, "/", kLeaderName); }

std::string CheckpointKey(const std::string& run_id, uint64_t round) {
  return absl::StrFormat("%s/checkpoint-%08u.zckpt", run_id, round);
}

// The round of "checkpoint-00000007.zckpt"; nullopt for any other name, including
// non-canonical spellings of a round ("checkpoint-7.zckpt"): reads and deletes rebuild
// the key from the round, so only the canonical name may stand for it.
std::optional<uint64_t> RoundOfName(absl::string_view name) {
  absl::string_view digits = name;
  if (!absl::ConsumePrefix(&digits, kCheckpointPrefix) ||
      !absl::ConsumeSuffix(&digits, kCheckpointSuffix) || digits.empty()) {
    return std::nullopt;
  }
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  uint64_t round = 0;
  if (!absl::SimpleAtoi(digits, &round)) return std::nullopt;
  if (absl::StrFormat("checkpoint-%08u.zckpt", round) != name) return std::nullopt;
  return round;
}

bool HasNewline(const std::string& s) { return s.find_first_of("\r\n") != std::string::npos; }

absl::Status WithContext(const absl::Status& s, absl::string_view context) {
  return absl::Status(s.code(), absl::StrCat(context, ": ", s.message()));
}

}  // namespace

absl::Status ValidateRunLocation(const std::string& aggregate_dir, const std::string& run_id) {
  if (aggregate_dir.empty()) {
    return absl::InvalidArgumentError("aggregate_dir is empty: no shared directory for the run");
  }
  if (!IsValidRunId(run_id)) {
    return absl::InvalidArgumentError(
        absl::StrCat("run_id='", run_id,
                     "' cannot name a directory: expected 1 to 128 characters from "
                     "[A-Za-z0-9._-], not \".\" or \"..\""));
  }
  return absl::OkStatus();
}

std::string JoinLocation(const std::string& aggregate_dir, const std::string& key) {
  absl::string_view dir = aggregate_dir;
  while (dir.size() > 1 && dir.back() == '/' && !absl::EndsWith(dir, "://")) dir.remove_suffix(1);
  if (dir == "/" || absl::EndsWith(dir, "://")) return absl::StrCat(dir, key);
  return absl::StrCat(dir, "/", key);
}

std::string CheckpointPath(const std::string& aggregate_dir, const std::string& run_id,
                           uint64_t round) {
  return JoinLocation(aggregate_dir, CheckpointKey(run_id, round));
}

absl::StatusOr<std::unique_ptr<AggregateDir>> AggregateDir::Open(
    const std::string& aggregate_dir, const storage::S3Options& s3, absl::Duration budget,
    Env* env) {
  if (aggregate_dir.empty()) {
    return absl::InvalidArgumentError("aggregate_dir is empty: no shared directory for the run");
  }
  absl::StatusOr<std::unique_ptr<storage::ObjectStore>> store =
      storage::OpenStore(aggregate_dir, s3, budget, env);
  if (!store.ok()) {
    return WithContext(store.status(), absl::StrCat("aggregate_dir '", aggregate_dir, "'"));
  }
  return std::make_unique<AggregateDir>(aggregate_dir, *std::move(store));
}

absl::StatusOr<std::string> AggregateDir::WriteCheckpoint(const std::string& run_id,
                                                          uint64_t round,
                                                          std::string_view bytes) {
  RETURN_IF_ERROR(ValidateRunLocation(location_, run_id));
  RETURN_IF_ERROR(store_->Put(CheckpointKey(run_id, round), bytes));
  return CheckpointPath(location_, run_id, round);
}

absl::StatusOr<std::string> AggregateDir::ReadCheckpoint(const std::string& run_id,
                                                         uint64_t round) {
  RETURN_IF_ERROR(ValidateRunLocation(location_, run_id));
  absl::StatusOr<std::string> bytes = store_->Get(CheckpointKey(run_id, round));
  if (absl::IsNotFound(bytes.status())) {
    return absl::NotFoundError(absl::StrCat("no checkpoint of round ", round, " at ",
                                            CheckpointPath(location_, run_id, round)));
  }
  return bytes;
}

absl::Status AggregateDir::DeleteCheckpoint(const std::string& run_id, uint64_t round) {
  RETURN_IF_ERROR(ValidateRunLocation(location_, run_id));
  return store_->Delete(CheckpointKey(run_id, round));
}

absl::Status AggregateDir::WriteLeader(const std::string& run_id, const std::string& address,
                                       const std::string& label,
                                       const std::string& instance) {
  RETURN_IF_ERROR(ValidateRunLocation(location_, run_id));
  if (HasNewline(address) || HasNewline(label) || HasNewline(instance)) {
    return absl::InvalidArgumentError(
        absl::StrCat("leader address '", address, "' / daemon label '", label,
                     "' / instance '", instance, "': none may contain a newline"));
  }
  const std::string host = LocalHostName();
  // Without a peer service the file still says who leads, so a follower on another node
  // fails at once with the fix instead of polling until its deadline.
  const std::string first =
      address.empty() ? std::string("peer_service=none") : absl::StrCat("address=", address);
  absl::Status written = store_->Put(
      LeaderKey(run_id), absl::StrCat(first, "\npid=", ::getpid(), "\ndaemon=", label, "\n",
                                  instance.empty() ? "" : absl::StrCat("instance=", instance, "\n"),
                                  host.empty() ? "" : absl::StrCat("host=", host, "\n")));
  if (!written.ok()) {
    return WithContext(written, absl::StrCat("cannot write the leader file of run '", run_id,
                                             "' under aggregate_dir ", location_));
  }
  return absl::OkStatus();
}

std::string LocalHostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "";
  std::string host(name);
  return HasNewline(host) ? "" : host;
}

absl::Status NoPeerServiceError(const std::string& run_id, const LeaderRecord& leader) {
  return absl::FailedPreconditionError(absl::StrCat(
      "the zephond hosting global_rank 0 of run '", run_id, "' (", leader.daemon,
      ") serves no peers: it was started without --peer-address. A run spanning nodes "
      "needs every zephond started with --peer-address HOST:PORT and peer "
      "authentication (--peer-tls-* or --peer-secret-file; see docs/deploy.md)"));
}

absl::StatusOr<LeaderRecord> AggregateDir::ReadLeaderRecord(const std::string& run_id) {
  RETURN_IF_ERROR(ValidateRunLocation(location_, run_id));
  const std::string where = JoinLocation(location_, LeaderKey(run_id));
  absl::StatusOr<std::string> text = store_->Get(LeaderKey(run_id));
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat(
        "no leader file at ", where, " (the zephond hosting global_rank 0 of run '", run_id,
        "' has not started it yet)"));
  }
  if (!text.ok()) {
    return WithContext(text.status(), absl::StrCat("cannot read the leader file ", where));
  }
  LeaderRecord record;
  bool no_peer_service = false;
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (absl::ConsumePrefix(&line, "address=") && !line.empty() && record.address.empty()) {
      record.address = std::string(line);
    }
    if (line == "peer_service=none") no_peer_service = true;
    if (absl::ConsumePrefix(&line, "daemon=")) record.daemon = std::string(line);
    if (absl::ConsumePrefix(&line, "instance=")) record.instance = std::string(line);
    if (absl::ConsumePrefix(&line, "host=")) record.host = std::string(line);
  }
  if (record.address.empty() && !no_peer_service) {
    return absl::DataLossError(absl::StrCat("leader file ", where, " has no address= line"));
  }
  return record;
}

absl::StatusOr<std::string> AggregateDir::ReadLeader(const std::string& run_id) {
  ASSIGN_OR_RETURN(LeaderRecord record, ReadLeaderRecord(run_id));
  if (record.address.empty()) return NoPeerServiceError(run_id, record);
  return record.address;
}

absl::StatusOr<std::vector<CheckpointObject>> AggregateDir::ListCheckpoints(
    const std::string& run_id) {
  RETURN_IF_ERROR(ValidateRunLocation(location_, run_id));
  ASSIGN_OR_RETURN(std::vector<storage::ObjectInfo> objects,
                   store_->List(absl::StrCat(run_id, "/", kCheckpointPrefix)));
  std::vector<CheckpointObject> out;
  for (storage::ObjectInfo& info : objects) {
    absl::string_view name = info.key;
    if (!absl::ConsumePrefix(&name, absl::StrCat(run_id, "/"))) continue;
    const std::optional<uint64_t> round = RoundOfName(name);
    if (!round.has_value()) continue;
    out.push_back(CheckpointObject{*round, JoinLocation(location_, info.key), std::move(info)});
  }
  std::sort(out.begin(), out.end(),
            [](const CheckpointObject& a, const CheckpointObject& b) { return a.round < b.round; });
  return out;
}

absl::StatusOr<std::vector<RunEntry>> AggregateDir::ListRuns() {
  ASSIGN_OR_RETURN(std::vector<storage::ObjectInfo> objects, store_->List(""));
  std::map<std::string, RunEntry> runs;
  for (storage::ObjectInfo& info : objects) {
    const std::vector<std::string> parts = absl::StrSplit(info.key, '/');
    if (parts.size() != 2 || !ValidateRunLocation(location_, parts[0]).ok()) continue;
    const std::optional<uint64_t> round = RoundOfName(parts[1]);
    if (parts[1] != kLeaderName && !round.has_value()) continue;
    RunEntry& run = runs[parts[0]];
    run.run_id = parts[0];
    if (round.has_value()) {
      run.checkpoints.push_back(
          CheckpointObject{*round, JoinLocation(location_, info.key), std::move(info)});
    } else {
      run.has_leader = true;
    }
  }
  std::vector<RunEntry> out;
  for (auto& [id, run] : runs) {
    std::sort(run.checkpoints.begin(), run.checkpoints.end(),
              [](const CheckpointObject& a, const CheckpointObject& b) {
                return a.round < b.round;
              });
    out.push_back(std::move(run));
  }
  return out;
}

absl::StatusOr<LocatedObject> ReadLocation(const std::string& location,
                                           const storage::S3Options& s3, Env* env) {
  std::string root;
  std::string key;
  ASSIGN_OR_RETURN(storage::Location where, storage::ClassifyLocation(location));
  if (where.kind == storage::LocationKind::kS3) {
    ASSIGN_OR_RETURN(storage::S3Location s3, storage::ParseS3Url(location));
    if (s3.key.empty() || absl::EndsWith(s3.key, "/")) {
      return absl::InvalidArgumentError(
          absl::StrCat("'", location, "' names a prefix, not an object"));
    }
    root = absl::StrCat("s3://", s3.bucket);
    key = s3.key;
  } else {
    const std::string& path = where.path_or_url;
    ASSIGN_OR_RETURN(const FileStat st, env->Stat(path));
    if (!st.is_regular) {
      return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
    }
    const size_t slash = path.rfind('/');
    root = slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
    key = slash == std::string::npos ? path : path.substr(slash + 1);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<storage::ObjectStore> store, storage::OpenStore(root, s3));
  LocatedObject out;
  // HEAD, then a GET of that version: bytes and metadata describe one object even if it
  // is being replaced. A missing object is reported by the GET, whose error names S3's
  // reason (a HEAD's 404 has no body to say NoSuchKey or NoSuchBucket).
  absl::StatusOr<storage::ObjectInfo> info = store->Head(key);
  if (!info.ok()) {
    RETURN_IF_ERROR(store->Get(key).status());  // the better error, if it fails too
    return info.status();
  }
  out.info = *std::move(info);
  ASSIGN_OR_RETURN(out.bytes, store->Get(key, out.info.version));
  out.info.size = out.bytes.size();
  return out;
}

}  // namespace zephon::checkpoint
