#include "daemon/checkpoint/rendezvous.h"

#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "daemon/identity.h"

namespace zephon::checkpoint {
namespace {

constexpr char kLeaderFileName[] = "leader";

std::string LeaderPath(const std::string& aggregate_dir, const std::string& run_id) {
  return absl::StrCat(RunDir(aggregate_dir, run_id), "/", kLeaderFileName);
}

bool HasNewline(const std::string& s) { return s.find_first_of("\r\n") != std::string::npos; }

}  // namespace

absl::Status ValidateRunLocation(const std::string& aggregate_dir, const std::string& run_id) {
  if (aggregate_dir.empty()) {
    return absl::InvalidArgumentError("aggregate_dir is empty: no shared directory for the run");
  }
  if (!daemon::IsValidRunId(run_id) || run_id == "." || run_id == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat("run_id='", run_id,
                     "' cannot name a directory: expected 1 to 128 characters from "
                     "[A-Za-z0-9._-], not \".\" or \"..\""));
  }
  return absl::OkStatus();
}

std::string RunDir(const std::string& aggregate_dir, const std::string& run_id) {
  absl::string_view dir = aggregate_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.remove_suffix(1);
  if (dir == "/") return absl::StrCat("/", run_id);
  return absl::StrCat(dir, "/", run_id);
}

std::string CheckpointPath(const std::string& aggregate_dir, const std::string& run_id,
                           uint64_t round) {
  return absl::StrFormat("%s/checkpoint-%08u.zckpt", RunDir(aggregate_dir, run_id), round);
}

absl::StatusOr<std::string> WriteCheckpointFile(const std::string& aggregate_dir,
                                                const std::string& run_id, uint64_t round,
                                                std::string_view bytes) {
  RETURN_IF_ERROR(ValidateRunLocation(aggregate_dir, run_id));
  std::string path = CheckpointPath(aggregate_dir, run_id, round);
  RETURN_IF_ERROR(WriteFileAtomically(path, bytes));
  return path;
}

absl::Status WriteLeader(const std::string& aggregate_dir, const std::string& run_id,
                         const std::string& address, const std::string& label) {
  RETURN_IF_ERROR(ValidateRunLocation(aggregate_dir, run_id));
  if (address.empty() || HasNewline(address) || HasNewline(label)) {
    return absl::InvalidArgumentError(
        absl::StrCat("leader address '", address, "' / daemon label '", label,
                     "': the address must be non-empty and neither may contain a newline"));
  }
  return WriteFileAtomically(
      LeaderPath(aggregate_dir, run_id),
      absl::StrCat("address=", address, "\npid=", ::getpid(), "\ndaemon=", label, "\n"));
}

absl::StatusOr<std::string> ReadLeader(const std::string& aggregate_dir,
                                       const std::string& run_id) {
  RETURN_IF_ERROR(ValidateRunLocation(aggregate_dir, run_id));
  const std::string path = LeaderPath(aggregate_dir, run_id);
  absl::StatusOr<std::string> text = ReadFile(path);
  if (absl::IsNotFound(text.status())) {
    return absl::NotFoundError(absl::StrCat(
        "no leader file at ", path,
        " (the zephond hosting global_rank 0 of run '", run_id, "' has not started it yet)"));
  }
  if (!text.ok()) return text.status();
  for (absl::string_view line : absl::StrSplit(*text, '\n')) {
    if (absl::ConsumePrefix(&line, "address=") && !line.empty()) return std::string(line);
  }
  return absl::DataLossError(absl::StrCat("leader file ", path, " has no address= line"));
}

}  // namespace zephon::checkpoint
