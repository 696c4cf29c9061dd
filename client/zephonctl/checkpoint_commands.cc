#include "client/zephonctl/checkpoint_commands.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "client/zephonctl/exit_codes.h"
#include "client/zephonctl/output.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "daemon/checkpoint/rendezvous.h"

namespace zephon::ctl {
namespace {

namespace fs = std::filesystem;

constexpr absl::string_view kFilePrefix = "checkpoint-";
constexpr absl::string_view kFileSuffix = ".zckpt";

// One file read and decoded: the verdict is "ok" or the decoder's reason.
struct Checked {
  std::string path;
  uint64_t size_bytes = 0;
  int64_t mtime_unix_ms = 0;
  absl::StatusOr<proto::CheckpointState> state = absl::UnknownError("unread");

  bool ok() const { return state.ok(); }
  std::string verdict() const {
    return state.ok() ? "ok (checksum good)" : std::string(state.status().message());
  }
};

Checked Check(const std::string& path) {
  Checked checked;
  checked.path = path;
  struct stat st {};
  if (stat(path.c_str(), &st) == 0) {
    checked.size_bytes = static_cast<uint64_t>(st.st_size);
    checked.mtime_unix_ms =
        static_cast<int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1000000;
  }
  absl::StatusOr<std::string> bytes = checkpoint::ReadFile(path);
  checked.state = bytes.ok() ? checkpoint::DecodeCheckpoint(*bytes)
                             : absl::StatusOr<proto::CheckpointState>(bytes.status());
  return checked;
}

// The round in "checkpoint-00000007.zckpt", or nullopt for other names.
std::optional<uint64_t> RoundFromName(const std::string& name) {
  if (!absl::StartsWith(name, kFilePrefix) || !absl::EndsWith(name, kFileSuffix)) {
    return std::nullopt;
  }
  const std::string digits =
      name.substr(kFilePrefix.size(), name.size() - kFilePrefix.size() - kFileSuffix.size());
  uint64_t round = 0;
  if (digits.empty() || !absl::SimpleAtoi(digits, &round)) return std::nullopt;
  return round;
}

struct RunListing {
  std::string run_id;
  std::string leader;  // address from the leader file, empty when none
  std::vector<std::pair<uint64_t, Checked>> files;  // by round
};

absl::StatusOr<std::vector<RunListing>> ListRuns(const std::string& aggregate_dir,
                                                 const std::string& only_run) {
  std::error_code ec;
  if (!fs::is_directory(aggregate_dir, ec)) {
    return absl::NotFoundError(absl::StrCat(aggregate_dir, " is not a directory"));
  }
  std::vector<RunListing> runs;
  for (const fs::directory_entry& entry : fs::directory_iterator(aggregate_dir, ec)) {
    if (!entry.is_directory()) continue;
    const std::string run_id = entry.path().filename().string();
    if (!only_run.empty() && run_id != only_run) continue;
    RunListing run;
    run.run_id = run_id;
    if (absl::StatusOr<std::string> leader = checkpoint::ReadLeader(aggregate_dir, run_id);
        leader.ok()) {
      run.leader = *leader;
    }
    std::error_code inner;
    for (const fs::directory_entry& file : fs::directory_iterator(entry.path(), inner)) {
      const std::optional<uint64_t> round = RoundFromName(file.path().filename().string());
      if (!round.has_value() || !file.is_regular_file()) continue;
      Checked checked = Check(file.path().string());
      // A file that decodes but belongs elsewhere was copied or renamed: say so.
      if (checked.ok() && (checked.state->run_id() != run_id || checked.state->round() != *round)) {
        checked.state = absl::DataLossError(absl::StrCat(
            "misplaced: the file holds run ", checked.state->run_id(), " round ",
            checked.state->round()));
      }
      run.files.emplace_back(*round, std::move(checked));
    }
    std::sort(run.files.begin(), run.files.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    runs.push_back(std::move(run));
  }
  if (ec) return absl::InternalError(absl::StrCat("cannot list ", aggregate_dir, ": ", ec.message()));
  std::sort(runs.begin(), runs.end(),
            [](const RunListing& a, const RunListing& b) { return a.run_id < b.run_id; });
  if (!only_run.empty() && runs.empty()) {
    return absl::NotFoundError(absl::StrCat("no run ", only_run, " under ", aggregate_dir));
  }
  return runs;
}

int RunLs(const std::string& aggregate_dir, const std::string& run, bool json) {
  absl::StatusOr<std::vector<RunListing>> runs = ListRuns(aggregate_dir, run);
  if (!runs.ok()) {
    std::cerr << "zephonctl checkpoint ls: " << runs.status().message() << "\n";
    return kExitFailed;
  }
  if (json) {
    std::vector<std::string> run_json;
    for (const RunListing& r : *runs) {
      std::vector<std::string> files;
      for (const auto& [round, c] : r.files) {
        files.push_back(absl::StrCat(
            "{\"path\":", JsonQuote(c.path), ",\"round\":", round, ",\"size_bytes\":",
            c.size_bytes, ",\"mtime\":", JsonQuote(FormatUnixMs(c.mtime_unix_ms)),
            ",\"ok\":", c.ok() ? "true" : "false", ",\"verdict\":", JsonQuote(c.verdict()),
            "}"));
      }
      run_json.push_back(absl::StrCat("{\"run_id\":", JsonQuote(r.run_id), ",\"leader\":",
                                      JsonQuote(r.leader), ",\"checkpoints\":[",
                                      absl::StrJoin(files, ","), "]}"));
    }
    std::cout << "{\"aggregate_dir\":" << JsonQuote(aggregate_dir) << ",\"runs\":["
              << absl::StrJoin(run_json, ",") << "]}\n";
    return kExitOk;
  }
  if (runs->empty()) {
    std::cout << "no runs under " << aggregate_dir << "\n";
    return kExitOk;
  }
  for (const RunListing& r : *runs) {
    std::cout << "run " << r.run_id
              << (r.leader.empty() ? "" : absl::StrCat("  leader ", r.leader)) << "\n";
    Table table({"ROUND", "SIZE", "MTIME", "VERDICT", "FILE"});
    for (const auto& [round, c] : r.files) {
      table.AddRow({absl::StrCat(round), HumanBytes(c.size_bytes), FormatUnixMs(c.mtime_unix_ms),
                    c.verdict(), fs::path(c.path).filename().string()});
    }
    if (table.empty()) {
      std::cout << "  no checkpoints\n";
    } else {
      table.Print(std::cout, "  ");
    }
  }
  return kExitOk;
}

void PrintState(const Checked& c, std::ostream& out) {
  const proto::CheckpointState& s = *c.state;
  out << "checkpoint " << c.path << "\n";
  Table fields({"FIELD", "VALUE"});
  fields.AddRow({"verdict", c.verdict()});
  fields.AddRow({"size", absl::StrCat(c.size_bytes, " bytes")});
  fields.AddRow({"run_id", s.run_id()});
  fields.AddRow({"round", absl::StrCat(s.round())});
  fields.AddRow({"spec_hash", s.spec_hash()});
  fields.AddRow({"canonical_replicas (C)", absl::StrCat(s.canonical_replicas())});
  fields.AddRow({"world_size", absl::StrCat(s.world_size())});
  fields.AddRow({"dp_degree", absl::StrCat(s.dp_degree())});
  fields.AddRow({"total_batches", absl::StrCat(s.total_batches())});
  fields.AddRow({"seed", absl::StrCat(s.seed())});
  fields.AddRow({"created", FormatUnixMs(s.created_unix_ms())});
  fields.AddRow({"format_version", absl::StrCat(s.format_version())});
  fields.Print(out);
  out << "\nlanes (" << s.lanes_size() << ")\n";
  Table lanes({"LANE", "NEXT_BATCH", "FLUSH_GROUP_CHUNK", "RECORDS_INTO_GROUP"});
  for (const auto& lane : s.lanes()) {
    lanes.AddRow({absl::StrCat(lane.lane()), absl::StrCat(lane.next_batch_index()),
                  absl::StrCat(lane.flush_group_chunk()), absl::StrCat(lane.records_into_group())});
  }
  lanes.Print(out, "  ");
  out << "\nranks (" << s.ranks_size() << ")\n";
  Table ranks({"RANK", "DP_GROUP", "DP_DEGREE", "DELIVERED", "DAEMON", "INSTANCE"});
  for (const auto& rank : s.ranks()) {
    ranks.AddRow({absl::StrCat(rank.global_rank()), absl::StrCat(rank.dp_group_id()),
                  absl::StrCat(rank.dp_degree()), absl::StrCat(rank.delivered()), rank.daemon(),
                  rank.instance_id()});
  }
  ranks.Print(out, "  ");
}

int RunInspect(const std::string& path, bool json) {
  const Checked c = Check(path);
  if (!c.ok()) {
    std::cerr << "zephonctl checkpoint inspect: BAD " << path << ": " << c.verdict() << "\n";
    return kExitFailed;
  }
  if (json) {
    std::cout << "{\"path\":" << JsonQuote(path) << ",\"size_bytes\":" << c.size_bytes
              << ",\"ok\":true,\"verdict\":" << JsonQuote(c.verdict())
              << ",\"created\":" << JsonQuote(FormatUnixMs(c.state->created_unix_ms()))
              << ",\"state\":" << ProtoToJson(*c.state) << "}\n";
  } else {
    PrintState(c, std::cout);
  }
  return kExitOk;
}

int RunVerify(const std::vector<std::string>& paths) {
  int bad = 0;
  for (const std::string& path : paths) {
    const Checked c = Check(path);
    if (c.ok()) {
      std::cout << "OK   " << path << "  (run " << c.state->run_id() << ", round "
                << c.state->round() << ", " << c.state->total_batches() << " batches)\n";
    } else {
      ++bad;
      std::cout << "BAD  " << path << "  " << c.verdict() << "\n";
    }
  }
  if (bad > 0) {
    std::cerr << "zephonctl checkpoint verify: " << bad << " of " << paths.size()
              << " file(s) failed\n";
    return kExitFailed;
  }
  return kExitOk;
}

}  // namespace

void AddCheckpointCommands(CLI::App& app, int* exit_code) {
  CLI::App* checkpoint = app.add_subcommand(
      "checkpoint", "List, inspect and verify merged checkpoint files (offline)");
  checkpoint->require_subcommand(1);

  struct LsArgs {
    std::string aggregate_dir, run;
    bool json = false;
  };
  auto ls_args = std::make_shared<LsArgs>();
  CLI::App* ls = checkpoint->add_subcommand(
      "ls", "Runs under AGG_DIR and their checkpoint files (round, size, mtime, verdict)");
  ls->add_option("AGG_DIR", ls_args->aggregate_dir, "The runs' aggregate_dir")->required();
  ls->add_option("--run", ls_args->run, "Only this run_id");
  ls->add_flag("--json", ls_args->json, "Print JSON");
  ls->callback([=] { *exit_code = RunLs(ls_args->aggregate_dir, ls_args->run, ls_args->json); });

  struct InspectArgs {
    std::string file;
    bool json = false;
  };
  auto inspect_args = std::make_shared<InspectArgs>();
  CLI::App* inspect = checkpoint->add_subcommand(
      "inspect", "Decode one checkpoint: run, round, spec, topology, per-lane progress, ranks");
  inspect->add_option("FILE", inspect_args->file, "A .zckpt file")->required();
  inspect->add_flag("--json", inspect_args->json, "Print JSON (the CheckpointState)");
  inspect->callback([=] { *exit_code = RunInspect(inspect_args->file, inspect_args->json); });

  auto verify_files = std::make_shared<std::vector<std::string>>();
  CLI::App* verify = checkpoint->add_subcommand(
      "verify", "Check files decode with a good checksum; exit 0 only if all do");
  verify->add_option("FILE", *verify_files, "Checkpoint files")->required();
  verify->callback([=] { *exit_code = RunVerify(*verify_files); });
}

}  // namespace zephon::ctl
