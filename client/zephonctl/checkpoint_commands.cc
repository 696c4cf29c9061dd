#include "client/zephonctl/checkpoint_commands.h"

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
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "client/zephonctl/exit_codes.h"
#include "client/zephonctl/output.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "daemon/checkpoint/aggregate_dir.h"
#include "daemon/storage/s3_flags.h"
#include "common/status_macros.h"

namespace zephon::ctl {
namespace {

namespace fs = std::filesystem;

// One checkpoint read and decoded: the verdict is "ok" or the reader's/decoder's reason.
struct Checked {
  std::string path;  // a file path or an s3:// URL
  uint64_t size_bytes = 0;
  int64_t mtime_unix_ms = 0;
  absl::StatusOr<proto::CheckpointState> state = absl::UnknownError("unread");

  bool ok() const { return state.ok(); }
  std::string verdict() const {
    return state.ok() ? "ok (checksum good)" : std::string(state.status().message());
  }
};

Checked Decoded(std::string path, const storage::ObjectInfo& info,
                const absl::StatusOr<std::string>& bytes) {
  Checked checked;
  checked.path = std::move(path);
  checked.size_bytes = info.size;
  checked.mtime_unix_ms = absl::ToUnixMillis(info.mtime);
  checked.state = bytes.ok() ? checkpoint::DecodeCheckpoint(*bytes)
                             : absl::StatusOr<proto::CheckpointState>(bytes.status());
  return checked;
}

Checked Check(const std::string& location, const storage::S3Options& s3) {
  absl::StatusOr<checkpoint::LocatedObject> object = checkpoint::ReadLocation(location, s3);
  if (!object.ok()) return Decoded(location, {}, object.status());
  return Decoded(location, object->info, object->bytes);
}

struct RunListing {
  std::string run_id;
  std::string leader;        // address from the leader file, empty when none
  std::string leader_error;  // why a leader file that exists could not be read
  std::vector<std::pair<uint64_t, Checked>> files;  // by round
};

// Opens aggregate_dir for reading: a local directory must already exist (opening would
// create it, and a typo should be an error, not a new empty directory).
absl::StatusOr<std::unique_ptr<checkpoint::AggregateDir>> OpenForReading(
    const std::string& aggregate_dir, const storage::S3Options& s3) {
  ASSIGN_OR_RETURN(storage::Location where, storage::ClassifyLocation(aggregate_dir));
  if (where.kind == storage::LocationKind::kLocal) {
    std::error_code ec;
    if (!fs::is_directory(where.path_or_url, ec)) {
      return absl::NotFoundError(absl::StrCat(aggregate_dir, " is not a directory"));
    }
  }
  return checkpoint::AggregateDir::Open(aggregate_dir, s3);
}

// The run's listing; `entry` holds what a listing of the store found for it.
RunListing Describe(checkpoint::AggregateDir& agg, checkpoint::RunEntry entry) {
  RunListing run;
  run.run_id = entry.run_id;
  if (entry.has_leader) {
    absl::StatusOr<std::string> leader = agg.ReadLeader(entry.run_id);
    if (leader.ok()) {
      run.leader = *leader;
    } else {
      run.leader_error = std::string(leader.status().message());
    }
  }
  for (checkpoint::CheckpointObject& object : entry.checkpoints) {
    Checked checked = Decoded(object.location, object.info,
                              agg.ReadCheckpoint(entry.run_id, object.round));
    // A file that decodes but belongs elsewhere was copied or renamed: say so.
    if (checked.ok() &&
        (checked.state->run_id() != entry.run_id || checked.state->round() != object.round)) {
      checked.state = absl::DataLossError(absl::StrCat(
          "misplaced: the file holds run ", checked.state->run_id(), " round ",
          checked.state->round()));
    }
    run.files.emplace_back(object.round, std::move(checked));
  }
  return run;
}

// Every run under aggregate_dir, or only `only_run` (then listing just that run's
// objects, not the whole store).
absl::StatusOr<std::vector<RunListing>> ListRuns(const std::string& aggregate_dir,
                                                 const storage::S3Options& s3,
                                                 const std::string& only_run) {
  ASSIGN_OR_RETURN(std::unique_ptr<checkpoint::AggregateDir> agg,
                   OpenForReading(aggregate_dir, s3));
  std::vector<RunListing> runs;
  if (!only_run.empty()) {
    checkpoint::RunEntry entry;
    entry.run_id = only_run;
    ASSIGN_OR_RETURN(entry.checkpoints, agg->ListCheckpoints(only_run));
    absl::StatusOr<std::string> leader = agg->ReadLeader(only_run);
    entry.has_leader = !absl::IsNotFound(leader.status());
    if (entry.checkpoints.empty() && !entry.has_leader) {
      return absl::NotFoundError(absl::StrCat("no run ", only_run, " under ", aggregate_dir));
    }
    runs.push_back(Describe(*agg, std::move(entry)));
    return runs;
  }
  ASSIGN_OR_RETURN(std::vector<checkpoint::RunEntry> entries, agg->ListRuns());
  for (checkpoint::RunEntry& entry : entries) runs.push_back(Describe(*agg, std::move(entry)));
  return runs;
}

// The base name of a path or URL, for the FILE column.
std::string BaseName(const std::string& location) {
  const size_t slash = location.rfind('/');
  return slash == std::string::npos ? location : location.substr(slash + 1);
}

int RunLs(const std::string& aggregate_dir, const std::string& run, bool json,
          const storage::S3Options& s3) {
  absl::StatusOr<std::vector<RunListing>> runs = ListRuns(aggregate_dir, s3, run);
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
                                      JsonQuote(r.leader), ",\"leader_error\":",
                                      JsonQuote(r.leader_error), ",\"checkpoints\":[",
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
              << (r.leader.empty() ? "" : absl::StrCat("  leader ", r.leader))
              << (r.leader_error.empty() ? "" : absl::StrCat("  leader file unreadable: ",
                                                             r.leader_error))
              << "\n";
    Table table({"ROUND", "SIZE", "MTIME", "VERDICT", "FILE"});
    for (const auto& [round, c] : r.files) {
      table.AddRow({absl::StrCat(round), HumanBytes(c.size_bytes), FormatUnixMs(c.mtime_unix_ms),
                    c.verdict(), BaseName(c.path)});
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
  Table ranks({"RANK", "DP_GROUP", "DP_DEGREE", "TAKEN", "DAEMON", "INSTANCE"});
  for (const auto& rank : s.ranks()) {
    ranks.AddRow({absl::StrCat(rank.global_rank()), absl::StrCat(rank.dp_group_id()),
                  absl::StrCat(rank.dp_degree()), absl::StrCat(rank.taken()), rank.daemon(),
                  rank.instance_id()});
  }
  ranks.Print(out, "  ");
}

int RunInspect(const std::string& path, bool json, const storage::S3Options& s3) {
  const Checked c = Check(path, s3);
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

int RunVerify(const std::vector<std::string>& paths, const storage::S3Options& s3) {
  int bad = 0;
  for (const std::string& path : paths) {
    const Checked c = Check(path, s3);
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

// Deletes the run's checkpoints older than its `keep_last` newest good ones. Counting
// only checkpoints that decode with a good checksum means damaged files can never push
// the last good ones out; damaged files newer than those are left for inspection.
int RunPrune(const std::string& aggregate_dir, const std::string& run, int keep_last,
             bool dry_run, const storage::S3Options& s3) {
  if (keep_last < 1) {
    std::cerr << "zephonctl checkpoint prune: --keep-last must be >= 1 (got " << keep_last
              << "): the newest good checkpoint is never deleted\n";
    return kExitUsage;
  }
  absl::StatusOr<std::vector<RunListing>> runs = ListRuns(aggregate_dir, s3, run);
  if (!runs.ok()) {
    std::cerr << "zephonctl checkpoint prune: " << runs.status().message() << "\n";
    return kExitFailed;
  }
  const RunListing& listing = runs->front();
  // Newest first: keep until `keep_last` good ones were seen, then delete the rest.
  std::vector<const std::pair<uint64_t, Checked>*> doomed;
  int good = 0;
  for (auto it = listing.files.rbegin(); it != listing.files.rend(); ++it) {
    if (good >= keep_last) {
      doomed.push_back(&*it);
    } else if (it->second.ok()) {
      ++good;
    }
  }
  if (doomed.empty()) {
    std::cout << "nothing to prune: run " << run << " has " << listing.files.size()
              << " checkpoint(s), " << good << " good\n";
    return kExitOk;
  }
  absl::StatusOr<std::unique_ptr<checkpoint::AggregateDir>> agg = OpenForReading(aggregate_dir, s3);
  if (!agg.ok()) {
    std::cerr << "zephonctl checkpoint prune: " << agg.status().message() << "\n";
    return kExitFailed;
  }
  int failed = 0;
  for (const auto* entry : doomed) {
    if (dry_run) {
      std::cout << "would delete " << entry->second.path << "\n";
      continue;
    }
    if (absl::Status s = (*agg)->DeleteCheckpoint(run, entry->first); !s.ok()) {
      ++failed;
      std::cerr << "cannot delete " << entry->second.path << ": " << s.message() << "\n";
    } else {
      std::cout << "deleted " << entry->second.path << "\n";
    }
  }
  std::cout << (dry_run ? "would keep " : "kept ") << listing.files.size() - doomed.size()
            << " checkpoint(s) of run " << run << " (" << good << " good)\n";
  return failed == 0 ? kExitOk : kExitFailed;
}

}  // namespace

void AddCheckpointCommands(CLI::App& app, int* exit_code) {
  CLI::App* checkpoint = app.add_subcommand(
      "checkpoint",
      "List, inspect, verify and prune merged checkpoints in a directory or s3:// (offline)");
  checkpoint->require_subcommand(1);
  // --s3-* apply to every checkpoint command and may follow it ("checkpoint ls --s3-...").
  auto s3_flags = std::make_shared<storage::S3Flags>();
  storage::AddS3Flags(*checkpoint, s3_flags.get());
  checkpoint->fallthrough();
  // The S3 options of the flags; nullopt (after saying why) when they are invalid.
  auto s3_options = [s3_flags, exit_code]() -> std::optional<storage::S3Options> {
    absl::StatusOr<storage::S3Options> s3 = storage::S3OptionsFromFlags(*s3_flags);
    if (!s3.ok()) {
      std::cerr << "zephonctl checkpoint: " << s3.status().message() << "\n";
      *exit_code = kExitUsage;
      return std::nullopt;
    }
    return *std::move(s3);
  };

  struct LsArgs {
    std::string aggregate_dir, run;
    bool json = false;
  };
  auto ls_args = std::make_shared<LsArgs>();
  CLI::App* ls = checkpoint->add_subcommand(
      "ls", "Runs under AGG_DIR and their checkpoint files (round, size, mtime, verdict)");
  ls->add_option("AGG_DIR", ls_args->aggregate_dir,
                 "The runs' aggregate_dir: a directory or s3://bucket/prefix")
      ->required();
  ls->add_option("--run", ls_args->run, "Only this run_id");
  ls->add_flag("--json", ls_args->json, "Print JSON");
  ls->callback([=] {
    const std::optional<storage::S3Options> s3 = s3_options();
    if (!s3) return;
    *exit_code = RunLs(ls_args->aggregate_dir, ls_args->run, ls_args->json, *s3);
  });

  struct InspectArgs {
    std::string file;
    bool json = false;
  };
  auto inspect_args = std::make_shared<InspectArgs>();
  CLI::App* inspect = checkpoint->add_subcommand(
      "inspect", "Decode one checkpoint: run, round, spec, topology, per-lane progress, ranks");
  inspect->add_option("FILE", inspect_args->file, "A .zckpt file path or s3:// URL")->required();
  inspect->add_flag("--json", inspect_args->json, "Print JSON (the CheckpointState)");
  inspect->callback([=] {
    const std::optional<storage::S3Options> s3 = s3_options();
    if (!s3) return;
    *exit_code = RunInspect(inspect_args->file, inspect_args->json, *s3);
  });

  struct PruneArgs {
    std::string aggregate_dir, run;
    int keep_last = 0;
    bool dry_run = false;
  };
  auto prune_args = std::make_shared<PruneArgs>();
  CLI::App* prune = checkpoint->add_subcommand(
      "prune", "Delete a run's checkpoints older than its newest N good ones");
  prune->add_option("AGG_DIR", prune_args->aggregate_dir, "The run's aggregate_dir")->required();
  prune->add_option("--run", prune_args->run, "The run_id")->required();
  prune->add_option("--keep-last", prune_args->keep_last,
                    "How many of the newest good (checksum-verified) checkpoints to keep")
      ->required();
  prune->add_flag("--dry-run", prune_args->dry_run, "Only print what would be deleted");
  prune->callback([=] {
    const std::optional<storage::S3Options> s3 = s3_options();
    if (!s3) return;
    *exit_code = RunPrune(prune_args->aggregate_dir, prune_args->run, prune_args->keep_last,
                          prune_args->dry_run, *s3);
  });

  auto verify_files = std::make_shared<std::vector<std::string>>();
  CLI::App* verify = checkpoint->add_subcommand(
      "verify", "Check files decode with a good checksum; exit 0 only if all do");
  verify->add_option("FILE", *verify_files, "Checkpoint file paths or s3:// URLs")->required();
  verify->callback([=] {
    const std::optional<storage::S3Options> s3 = s3_options();
    if (!s3) return;
    *exit_code = RunVerify(*verify_files, *s3);
  });
}

}  // namespace zephon::ctl
