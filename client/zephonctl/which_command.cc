#include "client/zephonctl/which_command.h"

#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "client/zephonctl/exit_codes.h"
#include "client/zephonctl/spec_source.h"
#include "client/zephonctl/output.h"
#include "common/status_macros.h"
#include "daemon/pipeline/provenance/step_locator.h"

namespace zephon::ctl {
namespace {

struct WhichArgs {
  std::string spec_file;
  uint64_t step = 0;
  uint64_t global_batches = 0;  // 0: C
  uint32_t dp_degree = 0;       // 0: the checkpoint's, else 1
  bool tokens = false;
  bool json = false;
  int threads = 0;  // 0: the machine's cores
};

std::string DatasetName(const pipeline::StepLocator& locator, uint32_t dataset) {
  return locator.source()->datasets()[dataset]->name();
}

std::string FileName(const pipeline::StepLocator& locator, const pipeline::SampleId& id) {
  return locator.source()->datasets()[id.dataset]->shard(id.shard).FileName();
}

// The tokens of one segment, as "[1, 2, 3]".
absl::StatusOr<std::string> TokenList(const pipeline::StepLocator& locator,
                                      const pipeline::Segment& seg) {
  std::vector<int32_t> tokens;
  RETURN_IF_ERROR(locator.source()->datasets()[seg.id.dataset]->AppendTokens(
      seg.id.shard, seg.id.index, seg.offset, seg.count, &tokens));
  std::string out = "[";
  for (size_t i = 0; i < tokens.size(); ++i) absl::StrAppend(&out, i ? ", " : "", tokens[i]);
  return out + "]";
}

// The row of each segment: segments fill rows of `cols` cells in order; a record batch
// (cols 0) has one segment per row.
std::vector<uint32_t> RowsOf(const pipeline::BatchPlan& plan) {
  std::vector<uint32_t> rows;
  uint64_t filled = 0;
  for (size_t i = 0; i < plan.segments.size(); ++i) {
    rows.push_back(plan.cols == 0 ? static_cast<uint32_t>(i)
                                  : static_cast<uint32_t>(filled / plan.cols));
    filled += plan.segments[i].count;
  }
  return rows;
}

absl::Status PrintJson(const pipeline::StepLocator& locator, const WhichArgs& args,
                       uint64_t global_batches, uint32_t dp_degree, const std::string& hash,
                       const std::vector<pipeline::StepLocator::StepBatch>& batches,
                       std::ostream& out) {
  out << "{\"step\": " << args.step << ", \"global_batches\": " << global_batches
      << ", \"dp_degree\": " << dp_degree << ", \"canonical_replicas\": "
      << locator.num_lanes() << ", \"spec_hash\": " << JsonQuote(hash) << ", \"batches\": [";
  for (size_t b = 0; b < batches.size(); ++b) {
    const pipeline::BatchPlan& plan = batches[b].plan;
    out << (b ? ", " : "") << "{\"dp_group\": " << batches[b].dp_group
        << ", \"batch_in_step\": " << batches[b].batch_in_step << ", \"lane\": " << plan.lane
        << ", \"lane_batch\": " << plan.lane_batch_index << ", \"rows\": " << plan.rows
        << ", \"segments\": [";
    const std::vector<uint32_t> rows = RowsOf(plan);
    for (size_t i = 0; i < plan.segments.size(); ++i) {
      const pipeline::Segment& seg = plan.segments[i];
      out << (i ? ", " : "") << "{\"row\": " << rows[i];
      if (seg.padding) {
        out << ", \"padding\": " << seg.count << "}";
        continue;
      }
      out << ", \"dataset\": " << JsonQuote(DatasetName(locator, seg.id.dataset))
          << ", \"dataset_index\": " << seg.id.dataset << ", \"shard\": " << seg.id.shard
          << ", \"file\": " << JsonQuote(FileName(locator, seg.id))
          << ", \"doc\": " << seg.id.index << ", \"token_start\": " << seg.offset
          << ", \"token_end\": " << seg.offset + seg.count;
      if (args.tokens) {
        ASSIGN_OR_RETURN(std::string tokens, TokenList(locator, seg));
        out << ", \"tokens\": " << tokens;
      }
      out << "}";
    }
    out << "]}";
  }
  out << "]}\n";
  return absl::OkStatus();
}

absl::Status PrintText(const pipeline::StepLocator& locator, const WhichArgs& args,
                       uint64_t global_batches, uint32_t dp_degree, const std::string& hash,
                       const std::vector<pipeline::StepLocator::StepBatch>& batches,
                       std::ostream& out) {
  out << "step " << args.step << ": " << global_batches << " micro-batches ("
      << global_batches / locator.num_lanes() << " from each of " << locator.num_lanes()
      << " lanes), dp_degree " << dp_degree << ", spec " << hash << "\n";
  Table table({"DP_GROUP", "BATCH", "LANE", "LANE_BATCH", "ROW", "DATASET", "FILE", "DOC",
               "TOKENS"});
  for (const pipeline::StepLocator::StepBatch& b : batches) {
    const std::vector<uint32_t> rows = RowsOf(b.plan);
    for (size_t i = 0; i < b.plan.segments.size(); ++i) {
      const pipeline::Segment& seg = b.plan.segments[i];
      std::vector<std::string> row = {absl::StrCat(b.dp_group), absl::StrCat(b.batch_in_step),
                                      absl::StrCat(b.plan.lane),
                                      absl::StrCat(b.plan.lane_batch_index),
                                      absl::StrCat(rows[i])};
      if (seg.padding) {
        row.insert(row.end(), {"(padding)", "", "", absl::StrCat(seg.count, " cells")});
      } else {
        std::string range = absl::StrCat("[", seg.offset, ", ", seg.offset + seg.count, ")");
        if (args.tokens) {
          ASSIGN_OR_RETURN(std::string tokens, TokenList(locator, seg));
          absl::StrAppend(&range, " ", tokens);
        }
        row.insert(row.end(), {DatasetName(locator, seg.id.dataset), FileName(locator, seg.id),
                               absl::StrCat(seg.id.index), range});
      }
      table.AddRow(std::move(row));
    }
  }
  table.Print(out);
  return absl::OkStatus();
}

absl::Status RunWhich(const WhichArgs& args, std::ostream& out) {
  ASSIGN_OR_RETURN(SpecSource source, LoadSpecSource(args.spec_file));
  ASSIGN_OR_RETURN(OpenedSpec opened, OpenLocator(source, args.spec_file, args.dp_degree,
                                                  args.threads));
  pipeline::StepLocator* const locator = opened.locator.get();
  const uint32_t dp_degree = opened.dp_degree;
  const std::string& hash = opened.spec_hash;
  const uint64_t global_batches =
      args.global_batches == 0 ? locator->num_lanes() : args.global_batches;
  ASSIGN_OR_RETURN(std::vector<pipeline::StepLocator::StepBatch> batches,
                   locator->Step(args.step, global_batches, dp_degree));
  std::ostringstream text;  // nothing printed unless all of it was found
  if (args.json) {
    RETURN_IF_ERROR(PrintJson(*locator, args, global_batches, dp_degree, hash, batches, text));
  } else {
    RETURN_IF_ERROR(PrintText(*locator, args, global_batches, dp_degree, hash, batches, text));
  }
  out << text.str();
  return absl::OkStatus();
}

}  // namespace

void AddWhichCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<WhichArgs>();
  CLI::App* which = app.add_subcommand(
      "which", "The documents in global step N of a run, computed from its spec or checkpoint");
  which->add_option("--spec", args->spec_file,
                    "A checkpoint file, or a PipelineSpec (or attach request) as JSON")
      ->required()
      ->check(CLI::ExistingFile);
  which->add_option("--step", args->step, "The global step (from 0)")->required();
  which->add_option("--global-batches", args->global_batches,
                    "Micro-batches per global step, a multiple of canonical_replicas "
                    "(default: canonical_replicas)");
  which->add_option("--dp-degree", args->dp_degree,
                    "DP groups to attribute batches to (default: the checkpoint's, else 1)")
      ->check(CLI::Range(1u, 1u << 20));
  which->add_flag("--tokens", args->tokens, "Also print each piece's token ids");
  which->add_flag("--json", args->json, "Print JSON");
  which->add_option("--threads", args->threads,
                    "Threads counting flush groups (default: the machine's cores)")
      ->check(CLI::Range(1, 1024));
  which->callback([args, exit_code] {
    const absl::Status status = RunWhich(*args, std::cout);
    if (!status.ok()) {
      std::cerr << "zephonctl which: " << status.message() << "\n";
      *exit_code = status.code() == absl::StatusCode::kInvalidArgument ||
                           status.code() == absl::StatusCode::kOutOfRange
                       ? kExitUsage
                       : kExitFailed;
    }
  });
}

}  // namespace zephon::ctl
