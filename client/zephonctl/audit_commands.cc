#include "client/zephonctl/audit_commands.h"

#include <iostream>
#include <memory>
#include <optional>
#include <algorithm>
#include <set>
#include <tuple>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/zephonctl/exit_codes.h"
#include "client/zephonctl/output.h"
#include "client/zephonctl/spec_source.h"
#include "common/digest.h"
#include "common/status_macros.h"
#include "daemon/audit/audit_diff.h"
#include "daemon/audit/audit_log.h"
#include "daemon/audit/step_merge.h"
#include "daemon/pipeline/batching/lane_stream.h"

namespace zephon::ctl {
namespace {

absl::StatusOr<audit::RunIndex> LoadRun(const std::string& dir) {
  ASSIGN_OR_RETURN(std::vector<proto::AuditRecord> records,
                   audit::ReadAuditDir(audit::ResolveAuditDir(dir)));
  absl::StatusOr<audit::RunIndex> index = audit::IndexRun(records);
  if (!index.ok()) {
    return absl::Status(index.status().code(), absl::StrCat(dir, ": ", index.status().message()));
  }
  return index;
}

std::string Triples(const std::vector<std::vector<uint64_t>>& ids) {
  std::vector<std::string> out;
  for (const auto& t : ids) out.push_back(absl::StrCat(t[0], "/", t[1], "/", t[2]));
  return out.empty() ? std::string("(none)") : absl::StrJoin(out, " ");
}

std::string JsonTriples(const std::vector<std::vector<uint64_t>>& ids) {
  std::vector<std::string> out;
  for (const auto& t : ids) out.push_back(absl::StrCat("[", t[0], ", ", t[1], ", ", t[2], "]"));
  return absl::StrCat("[", absl::StrJoin(out, ", "), "]");
}

struct DiffArgs {
  std::string a, b, steps;
  uint64_t global_batches = 0;
  bool json = false;
};

// The leader's per-lane-round records of both runs (step_merge.h), compared where both
// have them: "" when neither run has any.
struct MergedComparison {
  uint64_t a = 0, b = 0;                  // lane rounds merged
  std::optional<uint64_t> first_differing;  // lane round
  bool any() const { return a > 0 || b > 0; }
};

absl::StatusOr<MergedComparison> CompareMerged(const std::string& a, const std::string& b) {
  ASSIGN_OR_RETURN(std::vector<audit::MergedRound> ma,
                   audit::ReadMergedSteps(audit::ResolveAuditDir(a)));
  ASSIGN_OR_RETURN(std::vector<audit::MergedRound> mb,
                   audit::ReadMergedSteps(audit::ResolveAuditDir(b)));
  MergedComparison out;
  out.a = ma.size();
  out.b = mb.size();
  for (size_t j = 0; j < std::min(ma.size(), mb.size()); ++j) {
    if (ma[j].sha256 != mb[j].sha256) {
      out.first_differing = j;
      break;
    }
  }
  return out;
}

absl::StatusOr<bool> RunDiff(const DiffArgs& args, std::ostream& out) {
  uint64_t from = 0, to = UINT64_MAX;
  if (!args.steps.empty()) {
    std::vector<std::string> parts = absl::StrSplit(args.steps, ':');
    if (parts.size() != 2 || (!parts[0].empty() && !absl::SimpleAtoi(parts[0], &from)) ||
        (!parts[1].empty() && !absl::SimpleAtoi(parts[1], &to)) || from >= to) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--steps ", args.steps, " is not a range A:B of steps with A < B (either may be "
          "left out: 100: or :500)"));
    }
  }
  ASSIGN_OR_RETURN(audit::RunIndex a, LoadRun(args.a));
  ASSIGN_OR_RETURN(audit::RunIndex b, LoadRun(args.b));
  ASSIGN_OR_RETURN(audit::DiffReport r, audit::DiffRuns(a, b, args.global_batches, from, to));
  // The merged records are a cross-check: a damaged file is reported, not fatal.
  absl::StatusOr<MergedComparison> compared = CompareMerged(args.a, args.b);
  if (!compared.ok()) {
    std::cerr << "zephonctl audit diff: the leaders' merged records were not compared: "
              << compared.status().message() << "\n";
  }
  const MergedComparison merged = compared.ok() ? *compared : MergedComparison{};
  const uint64_t global_batches = r.batches_per_lane * a.canonical_replicas;
  if (args.json) {
    out << "{\"global_batches\": " << global_batches << ", \"steps_compared\": "
        << r.steps_compared << ", \"first_step\": "
        << (r.first_step ? absl::StrCat(*r.first_step) : "null") << ", \"last_step\": "
        << (r.last_step ? absl::StrCat(*r.last_step) : "null")
        << ", \"differing_steps\": " << r.differing_steps << ", \"only_a\": ["
        << absl::StrJoin(r.only_a, ", ") << "], \"only_b\": [" << absl::StrJoin(r.only_b, ", ")
        << "], \"merged_lane_rounds\": [" << merged.a << ", " << merged.b
        << "], \"merged_first_differing_lane_round\": "
        << (merged.first_differing ? absl::StrCat(*merged.first_differing) : "null")
        << ", \"first_difference\": ";
    if (r.first_difference) {
      const audit::StepDifference& d = *r.first_difference;
      out << "{\"step\": " << d.step << ", \"lane\": " << d.lane << ", \"lane_batch\": "
          << d.lane_batch << ", \"a_sha256\": " << JsonQuote(d.a_sha256)
          << ", \"b_sha256\": " << JsonQuote(d.b_sha256)
          << ", \"only_in_a\": " << JsonTriples(d.only_in_a)
          << ", \"only_in_b\": " << JsonTriples(d.only_in_b) << "}";
    } else {
      out << "null";
    }
    out << "}\n";
    return !r.first_difference.has_value();
  }
  out << "steps of " << global_batches << " batches (" << r.batches_per_lane << " from each of "
      << a.canonical_replicas << " lanes): " << r.steps_compared << " compared";
  if (r.first_step) out << " (steps " << *r.first_step << "-" << *r.last_step << ")";
  out << "\n";
  if (!r.only_a.empty()) {
    out << "  only " << args.a << " published step(s) " << absl::StrJoin(r.only_a, ", ")
        << (r.only_a.size() >= 20 ? ", ..." : "")
        << " (a longer run, or batches prefetched past where the other stopped)\n";
  }
  if (!r.only_b.empty()) {
    out << "  only " << args.b << " published step(s) " << absl::StrJoin(r.only_b, ", ")
        << (r.only_b.size() >= 20 ? ", ..." : "")
        << " (a longer run, or batches prefetched past where the other stopped)\n";
  }
  if (merged.any()) {
    out << "  the leaders' merged records (one per lane round, at checkpoints): " << merged.a
        << " and " << merged.b << " lane rounds; "
        << (merged.first_differing
                ? absl::StrCat("they first differ at lane round ", *merged.first_differing,
                               " (step ", *merged.first_differing / r.batches_per_lane, ")")
                : std::string("the common ones agree"))
        << "\n";
  }
  if (!r.first_difference) {
    out << "no difference: every step both runs hold has the same batches\n";
    return true;
  }
  const audit::StepDifference& d = *r.first_difference;
  out << "first difference at step " << d.step << ": lane " << d.lane << " batch "
      << d.lane_batch << " (tokens sha256 " << d.a_sha256.substr(0, 16) << " vs "
      << d.b_sha256.substr(0, 16) << ")\n"
      << "  samples only in " << args.a << " (dataset/shard/doc): " << Triples(d.only_in_a) << "\n"
      << "  samples only in " << args.b << ": " << Triples(d.only_in_b) << "\n"
      << r.differing_steps << " of " << r.steps_compared << " compared steps differ\n";
  return false;
}

struct VerifyArgs {
  std::string dir, spec;
  bool json = false;
};

absl::StatusOr<bool> RunVerify(const VerifyArgs& args, std::ostream& out) {
  ASSIGN_OR_RETURN(audit::RunIndex run, LoadRun(args.dir));
  ASSIGN_OR_RETURN(SpecSource source, LoadSpecSource(args.spec));
  // Counted from the lanes' start, never anchored at the run's own positions (nor a
  // checkpoint's, which are the run's too): the proof must not take the run's word for
  // where a batch was. It reads every batch's tokens anyway, which costs more.
  ASSIGN_OR_RETURN(OpenedSpec opened,
                   OpenLocator(source, args.spec, 0, 0, /*anchor_at_checkpoint=*/false));
  if (std::find(run.spec_hashes.begin(), run.spec_hashes.end(), opened.spec_hash) ==
      run.spec_hashes.end()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the run's batches were made from spec hash ", absl::StrJoin(run.spec_hashes, ", "),
        " but ", args.spec, " gives ", opened.spec_hash,
        " (another spec, or datasets changed since): nothing to verify against"));
  }
  uint64_t verified = 0;
  std::string failure;
  // In step order (lane batch, then lane): the failure reported is the run's earliest.
  std::vector<std::pair<uint32_t, uint64_t>> keys;
  for (const auto& [key, record] : run.batches) keys.push_back(key);
  std::sort(keys.begin(), keys.end(), [](const auto& x, const auto& y) {
    return std::tie(x.second, x.first) < std::tie(y.second, y.first);
  });
  for (const auto& key : keys) {
    const proto::AuditRecord& record = run.batches.at(key);
    ASSIGN_OR_RETURN(std::optional<pipeline::BatchPlan> plan,
                     opened.locator->LaneBatch(key.first, key.second));
    if (!plan) {
      failure = absl::StrCat("lane ", key.first, " batch ", key.second,
                             " is past the lane's end under this spec");
      break;
    }
    std::vector<uint64_t> ids;
    for (const pipeline::SampleId& id : plan->sample_ids) {
      ids.insert(ids.end(), {id.dataset, id.shard, id.index});
    }
    if (!std::equal(ids.begin(), ids.end(), record.sample_ids().begin(),
                    record.sample_ids().end())) {
      failure = absl::StrCat("lane ", key.first, " batch ", key.second,
                             ": the samples delivered are not the spec's");
      break;
    }
    ASSIGN_OR_RETURN(pipeline::Batch batch,
                     pipeline::Materialize(*plan, opened.locator->source()->datasets()));
    const std::string sha = Sha256(absl::string_view(
        reinterpret_cast<const char*>(batch.tokens.data()), batch.tokens.size() * sizeof(int32_t)));
    if (sha != record.token_sha256()) {
      failure = absl::StrCat("lane ", key.first, " batch ", key.second,
                             ": the tokens delivered (sha256 ",
                             absl::BytesToHexString(record.token_sha256()).substr(0, 16),
                             ") are not the spec's (", absl::BytesToHexString(sha).substr(0, 16),
                             "): a dataset file changed under the run?");
      break;
    }
    ++verified;
  }
  if (args.json) {
    out << "{\"batches\": " << run.batches.size() << ", \"verified\": " << verified
        << ", \"spec_hash\": " << JsonQuote(opened.spec_hash)
        << ", \"failure\": " << (failure.empty() ? "null" : JsonQuote(failure)) << "}\n";
  } else if (failure.empty()) {
    out << "verified " << verified << " batches: each holds the samples and tokens spec "
        << opened.spec_hash << " gives\n";
  } else {
    out << "verification failed after " << verified << " of " << run.batches.size()
        << " batches: " << failure << "\n";
  }
  return failure.empty();
}

// Runs `body`, printing its error; exit 0 when it returned true, 1 when false.
template <typename F>
int Exit(const char* command, F body) {
  std::ostringstream text;
  absl::StatusOr<bool> ok = body(text);
  if (!ok.ok()) {
    std::cerr << "zephonctl audit " << command << ": " << ok.status().message() << "\n";
    return ok.status().code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailed;
  }
  std::cout << text.str();
  return *ok ? kExitOk : kExitFailed;
}

}  // namespace

void AddAuditCommands(CLI::App& app, int* exit_code) {
  CLI::App* audit = app.add_subcommand(
      "audit", "Compare runs' audit logs step by step, or verify one against its spec");
  audit->require_subcommand(1);

  auto diff_args = std::make_shared<DiffArgs>();
  CLI::App* diff = audit->add_subcommand(
      "diff", "The first global step whose batches differ between two runs (exit 1 if any)");
  diff->add_option("RUN_A", diff_args->a, "Audit directory of the first run")->required();
  diff->add_option("RUN_B", diff_args->b, "Audit directory of the second run")->required();
  diff->add_option("--steps", diff_args->steps, "Only steps A:B (A included, B not)");
  diff->add_option("--global-batches", diff_args->global_batches,
                   "Micro-batches per global step (default: canonical_replicas)");
  diff->add_flag("--json", diff_args->json, "Print JSON");
  diff->callback([diff_args, exit_code] {
    *exit_code = Exit("diff", [&](std::ostream& out) { return RunDiff(*diff_args, out); });
  });

  auto verify_args = std::make_shared<VerifyArgs>();
  CLI::App* verify = audit->add_subcommand(
      "verify", "Recompute every audited batch from the spec and compare (exit 1 if any differs)");
  verify->add_option("RUN", verify_args->dir, "Audit directory of the run")->required();
  verify->add_option("--spec", verify_args->spec,
                     "A checkpoint of the run, or its PipelineSpec (or attach request) as JSON")
      ->required()
      ->check(CLI::ExistingFile);
  verify->add_flag("--json", verify_args->json, "Print JSON");
  verify->callback([verify_args, exit_code] {
    *exit_code = Exit("verify", [&](std::ostream& out) { return RunVerify(*verify_args, out); });
  });
}

}  // namespace zephon::ctl
