#include "client/zephonctl/which_command.h"

#include <cstdint>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/zephonctl/exit_codes.h"
#include "client/zephonctl/spec_source.h"
#include "client/zephonctl/output.h"
#include "common/cache_dir.h"
#include "common/status_macros.h"
#include "daemon/pipeline/ordering/lanes.h"
#include "daemon/pipeline/provenance/step_locator.h"
#include "tokenizer/tokenizer.h"

namespace zephon::ctl {
namespace {

struct WhichArgs {
  std::string spec_file;
  std::optional<uint64_t> step;
  std::string sample;       // DATASET/SHARD/DOC: the inverse question
  uint64_t passes = 0;      // 0: every pass of a finite stream, 10 of an endless one
  uint64_t global_batches = 0;  // 0: C
  uint32_t dp_degree = 0;       // 0: the checkpoint's, else 1
  bool tokens = false;
  std::string tokenizer;  // --text: decode each piece with it
  std::string audit;      // an audit directory of a run of this spec: exact anchors
  std::vector<std::string> anchors;  // more cache dirs holding this spec's step anchors
  bool count_from_start = false;     // ignore (and keep no) step anchors
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

// The text of one segment, decoded with `tokenizer`; newlines and tabs shown as \n, \t.
absl::StatusOr<std::string> SegmentText(const pipeline::StepLocator& locator,
                                        const tokenizer::Tokenizer& tokenizer,
                                        const pipeline::Segment& seg) {
  std::vector<int32_t> tokens;
  RETURN_IF_ERROR(locator.source()->datasets()[seg.id.dataset]->AppendTokens(
      seg.id.shard, seg.id.index, seg.offset, seg.count, &tokens));
  return tokenizer.Decode(tokens);
}

// For one line of the table: control characters escaped, at most 60 characters.
std::string OneLine(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (out.size() >= 60) return out + "...";
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out;
}

absl::Status PrintJson(const pipeline::StepLocator& locator, const WhichArgs& args,
                       const tokenizer::Tokenizer* tokenizer,
                       uint64_t global_batches, uint32_t dp_degree, const std::string& hash,
                       const std::vector<pipeline::StepLocator::StepBatch>& batches,
                       std::ostream& out) {
  out << "{\"step\": " << *args.step << ", \"global_batches\": " << global_batches
      << ", \"dp_degree\": " << dp_degree << ", \"canonical_replicas\": "
      << locator.num_lanes() << ", \"spec_hash\": " << JsonQuote(hash)
      << ", \"anchors\": " << locator.anchors() << ", \"batches\": [";
  for (size_t b = 0; b < batches.size(); ++b) {
    const pipeline::BatchPlan& plan = batches[b].plan;
    out << (b ? ", " : "") << "{\"dp_group\": " << batches[b].dp_group
        << ", \"batch_in_step\": " << batches[b].batch_in_step << ", \"lane\": " << plan.lane
        << ", \"lane_batch\": " << plan.lane_batch_index << ", \"rows\": " << plan.rows
        << ", \"segments\": [";
    const std::vector<uint32_t> rows = pipeline::SegmentRows(plan);
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
      if (tokenizer != nullptr) {
        ASSIGN_OR_RETURN(std::string text, SegmentText(locator, *tokenizer, seg));
        out << ", \"text\": " << JsonQuote(text);
      }
      out << "}";
    }
    out << "]}";
  }
  out << "]}\n";
  return absl::OkStatus();
}

absl::Status PrintText(const pipeline::StepLocator& locator, const WhichArgs& args,
                       const tokenizer::Tokenizer* tokenizer,
                       uint64_t global_batches, uint32_t dp_degree, const std::string& hash,
                       const std::vector<pipeline::StepLocator::StepBatch>& batches,
                       std::ostream& out) {
  out << "step " << *args.step << ": " << global_batches << " micro-batches ("
      << global_batches / locator.num_lanes() << " from each of " << locator.num_lanes()
      << " lanes), dp_degree " << dp_degree << ", spec " << hash << "\n";
  Table table({"DP_GROUP", "BATCH", "LANE", "LANE_BATCH", "ROW", "DATASET", "FILE", "DOC",
               "TOKENS"});
  for (const pipeline::StepLocator::StepBatch& b : batches) {
    const std::vector<uint32_t> rows = pipeline::SegmentRows(b.plan);
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
        if (tokenizer != nullptr) {
          ASSIGN_OR_RETURN(std::string text, SegmentText(locator, *tokenizer, seg));
          absl::StrAppend(&range, " \"", OneLine(text), "\"");
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

// DATASET/SHARD/DOC, each by number or (dataset, shard) by name.
absl::StatusOr<pipeline::SampleId> ParseSample(const pipeline::StepLocator& locator,
                                               const std::string& text) {
  const std::vector<std::string> parts = absl::StrSplit(text, '/');
  const auto& datasets = locator.source()->datasets();
  pipeline::SampleId id;
  bool ok = parts.size() == 3;
  if (ok && !absl::SimpleAtoi(parts[0], &id.dataset)) {
    ok = false;
    for (uint32_t d = 0; d < datasets.size(); ++d) {
      if (datasets[d]->name() == parts[0]) id.dataset = d, ok = true;
    }
  }
  if (ok && id.dataset < datasets.size() && !absl::SimpleAtoi(parts[1], &id.shard)) {
    ok = false;
    for (uint32_t s = 0; s < datasets[id.dataset]->NumShards(); ++s) {
      if (datasets[id.dataset]->shard(s).FileName() == parts[1]) id.shard = s, ok = true;
    }
  }
  if (!ok || !absl::SimpleAtoi(parts[2], &id.index)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--sample ", text, " is not DATASET/SHARD/DOC (the dataset by name or number, the "
        "shard by file name or number, the document's index in it: web/part-00.bin/123)"));
  }
  return id;
}

absl::Status RunSample(const WhichArgs& args, pipeline::StepLocator& locator,
                       uint32_t dp_degree, std::ostream& out) {
  ASSIGN_OR_RETURN(pipeline::SampleId id, ParseSample(locator, args.sample));
  const bool endless = !locator.source()->NumChunks().has_value();
  const uint64_t passes = args.passes > 0 ? args.passes : (endless ? 10 : 1u << 20);
  ASSIGN_OR_RETURN(std::vector<pipeline::StepLocator::Occurrence> found,
                   locator.Occurrences(id, passes));
  ASSIGN_OR_RETURN(const uint64_t per_lane, locator.BatchesPerLane(args.global_batches));
  const uint64_t global_batches = per_lane * locator.num_lanes();
  RETURN_IF_ERROR(pipeline::CheckDpDegreeFitsLanes(dp_degree, locator.num_lanes()));
  const auto& datasets = locator.source()->datasets();
  const std::string name = absl::StrCat(datasets[id.dataset]->name(), "/",
                                        datasets[id.dataset]->shard(id.shard).FileName(), "/",
                                        id.index);
  std::ostringstream text;
  if (args.json) {
    text << "{\"sample\": " << JsonQuote(name) << ", \"dataset_index\": " << id.dataset
         << ", \"shard\": " << id.shard << ", \"doc\": " << id.index
         << ", \"global_batches\": " << global_batches << ", \"dp_degree\": " << dp_degree
         << ", \"anchors\": " << locator.anchors() << ", \"occurrences\": [";
  } else {
    text << name << ": " << found.size() << " batch(es) in "
         << (args.passes > 0 ? absl::StrCat("the first ", args.passes, " pass(es)")
             : endless       ? std::string("the first 10 passes (an endless stream; --passes "
                                           "for more)")
                             : std::string("the stream"))
         << "; steps of " << global_batches << " micro-batches, dp_degree " << dp_degree << "\n";
  }
  Table table({"PASS", "STEP", "DP_GROUP", "BATCH", "LANE", "LANE_BATCH", "ROW", "TOKENS"});
  for (size_t n = 0; n < found.size(); ++n) {
    const pipeline::StepLocator::Occurrence& o = found[n];
    ASSIGN_OR_RETURN(const pipeline::StepLocator::StepPlace place,
                     locator.PlaceOf(o.lane, o.lane_batch, global_batches, dp_degree));
    const uint64_t step = place.step;
    const uint32_t batch_in_step = place.batch_in_step;
    if (args.json) {
      text << (n ? ", " : "") << "{\"pass\": " << o.pass << ", \"chunk\": " << o.chunk
           << ", \"step\": " << step << ", \"dp_group\": " << place.dp_group
           << ", \"batch_in_step\": " << batch_in_step << ", \"lane\": " << o.lane
           << ", \"lane_batch\": " << o.lane_batch << ", \"pieces\": [";
      for (size_t p = 0; p < o.pieces.size(); ++p) {
        text << (p ? ", " : "") << "{\"row\": " << o.pieces[p].first << ", \"token_start\": "
             << o.pieces[p].second.offset << ", \"token_end\": "
             << o.pieces[p].second.offset + o.pieces[p].second.count << "}";
      }
      text << "]}";
      continue;
    }
    for (const auto& [row, seg] : o.pieces) {
      table.AddRow({absl::StrCat(o.pass), absl::StrCat(step), absl::StrCat(place.dp_group),
                    absl::StrCat(batch_in_step), absl::StrCat(o.lane),
                    absl::StrCat(o.lane_batch), absl::StrCat(row),
                    absl::StrCat("[", seg.offset, ", ", seg.offset + seg.count, ")")});
    }
  }
  if (args.json) {
    text << "]}\n";
  } else {
    table.Print(text);
  }
  out << text.str();
  return absl::OkStatus();
}

absl::Status Answer(const WhichArgs& args, OpenedSpec& opened, std::ostream& out);

absl::Status RunWhich(const WhichArgs& args, std::ostream& out) {
  ASSIGN_OR_RETURN(SpecSource source, LoadSpecSource(args.spec_file));
  ASSIGN_OR_RETURN(OpenedSpec opened, OpenLocator(source, args.spec_file, args.dp_degree,
                                                  args.threads));
  if (!args.count_from_start) {
    // Where runs of this spec (zephond) and earlier queries stood: this node's cache and
    // any --anchors directory.
    std::vector<std::string> dirs = {DefaultCacheDir()};
    dirs.insert(dirs.end(), args.anchors.begin(), args.anchors.end());
    RETURN_IF_ERROR(AnchorFromCache(dirs, &opened).status());
  }
  RETURN_IF_ERROR(Answer(args, opened, out));
  if (!args.count_from_start) {
    // A cache: a query that cannot keep its counts still answered.
    (void)KeepCountedAnchors(DefaultCacheDir(), opened);
  }
  return absl::OkStatus();
}

absl::Status Answer(const WhichArgs& args, OpenedSpec& opened, std::ostream& out) {
  pipeline::StepLocator* const locator = opened.locator.get();
  const uint32_t dp_degree = opened.dp_degree;
  const std::string& hash = opened.spec_hash;
  if (!args.audit.empty()) {
    // The step's lane rounds, when the run's leader merged them; else the whole log.
    ASSIGN_OR_RETURN(const uint64_t per_lane, locator->BatchesPerLane(args.global_batches));
    const uint64_t first = args.step ? *args.step * per_lane : 0;
    const uint64_t end = args.step ? first + per_lane : 0;
    ASSIGN_OR_RETURN(uint64_t anchors, AnchorFromAudit(args.audit, &opened, first, end));
    if (anchors == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--audit ", args.audit, " holds no batch of spec ", hash,
          " (another run's log, or the datasets changed since)"));
    }
  }
  if (!args.sample.empty()) return RunSample(args, *locator, dp_degree, out);
  const uint64_t global_batches =
      args.global_batches == 0 ? locator->num_lanes() : args.global_batches;
  ASSIGN_OR_RETURN(std::vector<pipeline::StepLocator::StepBatch> batches,
                   locator->Step(*args.step, global_batches, dp_degree));
  std::unique_ptr<tokenizer::Tokenizer> tok;
  if (!args.tokenizer.empty()) {
    absl::StatusOr<std::unique_ptr<tokenizer::Tokenizer>> loaded =
        tokenizer::Tokenizer::Load(args.tokenizer);
    if (!loaded.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--text ", args.tokenizer, ": ", loaded.status().message()));
    }
    tok = *std::move(loaded);
  }
  std::ostringstream text;  // nothing printed unless all of it was found
  if (args.json) {
    RETURN_IF_ERROR(
        PrintJson(*locator, args, tok.get(), global_batches, dp_degree, hash, batches, text));
  } else {
    RETURN_IF_ERROR(
        PrintText(*locator, args, tok.get(), global_batches, dp_degree, hash, batches, text));
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
  CLI::Option* step = which->add_option("--step", args->step, "The global step (from 0)");
  CLI::Option* sample = which->add_option(
      "--sample", args->sample,
      "The inverse: every step that holds document DATASET/SHARD/DOC (names or numbers)");
  step->excludes(sample);
  which->add_option("--passes", args->passes,
                    "--sample: passes of its dataset to follow (default: all of a finite "
                    "stream, 10 of an endless one)")
      ->needs(sample);
  which->add_option("--global-batches", args->global_batches,
                    "Micro-batches per global step, a multiple of canonical_replicas "
                    "(default: canonical_replicas)");
  which->add_option("--dp-degree", args->dp_degree,
                    "DP groups to attribute batches to (default: the checkpoint's, else 1)")
      ->check(CLI::Range(1u, 1u << 20));
  which->add_flag("--tokens", args->tokens, "Also print each piece's token ids");
  which->add_option("--text", args->tokenizer,
                    "Also print each piece's text, decoded with this tokenizer (a "
                    "tokenizer.json, its directory, or a SentencePiece .model)")
      ->check(CLI::ExistingPath)
      ->excludes(sample);
  which->add_flag("--json", args->json, "Print JSON");
  which->add_option("--audit", args->audit,
                    "An audit directory of a run of this spec: its batches' positions are "
                    "exact anchors, so steps that run reached are found without counting")
      ->check(CLI::ExistingDirectory);
  which->add_option("--anchors", args->anchors,
                    "Another node's or daemon's cache directory (zephond --cache-dir) whose "
                    "step anchors of this spec to use too; this user's cache is always read")
      ->check(CLI::ExistingDirectory);
  which->add_flag("--count-from-start", args->count_from_start,
                  "Use no cached step anchors (count every flush group from the run's "
                  "start, or from a checkpoint's or --audit's positions) and keep none");
  which->add_option("--threads", args->threads,
                    "Threads counting flush groups (default: the machine's cores)")
      ->check(CLI::Range(1, 1024));
  which->callback([args, exit_code] {
    if (!args->step.has_value() && args->sample.empty()) {
      std::cerr << "zephonctl which: give --step N (what step N holds) or --sample "
                   "DATASET/SHARD/DOC (where a document went)\n";
      *exit_code = kExitUsage;
      return;
    }
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
