#include "daemon/pipeline/spec.h"

#include <cmath>
#include <set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/mix.h"
#include "common/run_limits.h"
#include "common/status_macros.h"
#include "daemon/pipeline/batching/chain_spec.h"
#include "daemon/pipeline/ordering/block_shuffle.h"
#include "daemon/pipeline/formats/jsonl_reader.h"
#include "daemon/pipeline/formats/record_formats.h"
#include "daemon/pipeline/batching/lane_stream.h"
#include "daemon/pipeline/batching/packers.h"
#include "daemon/pipeline/ordering/lanes.h"
#include "daemon/pipeline/ordering/phase_schedule.h"
#include "daemon/pipeline/ordering/repetition.h"
#include "daemon/pipeline/ordering/work_source.h"
#include "daemon/pipeline/spec_string_form.h"
#include "daemon/pipeline/tokenize_spec.h"

namespace zephon::pipeline {
namespace {

absl::Status ValidateDatasets(const proto::WorkSourceSpec& ws) {
  if (ws.datasets_size() == 0) {
    return absl::InvalidArgumentError("work_source.datasets: at least one dataset required");
  }
  std::set<std::string> names;
  for (int k = 0; k < ws.datasets_size(); ++k) {
    const auto& d = ws.datasets(k);
    if (d.name().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("work_source.datasets[", k, "].name is empty"));
    }
    if (!names.insert(d.name()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("work_source.datasets: duplicate dataset name '", d.name(), "'"));
    }
    if (d.path().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("work_source.datasets[", k, "] ('",
                                                     d.name(), "').path is empty"));
    }
    const bool record = RecordFormats::Global().Find(d.format()) != nullptr;
    if (!d.format().empty() && d.format() != "megatron" && d.format() != "flat" &&
        d.format() != "jsonl" && !record) {
      std::string known = "megatron, flat, jsonl";
      for (const std::string& n : RecordFormats::Global().Names()) absl::StrAppend(&known, ", ", n);
      return absl::InvalidArgumentError(absl::StrCat("work_source.datasets[", k, "].format '",
                                                     d.format(), "' unknown (", known, ")"));
    }
    if (!d.field().empty() && !d.jsonl_field().empty() && d.field() != d.jsonl_field()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "work_source.datasets[", k, "] ('", d.name(), "') sets field '", d.field(),
          "' and jsonl_field '", d.jsonl_field(), "': they name the same thing; set one"));
    }
    if (d.on_null() != proto::DatasetSpec::ON_NULL_UNSPECIFIED &&
        d.on_null() != proto::DatasetSpec::SKIP && d.on_null() != proto::DatasetSpec::ERROR) {
      return absl::InvalidArgumentError(absl::StrCat("work_source.datasets[", k, "] ('",
                                                     d.name(), "').on_null ", d.on_null(),
                                                     " unknown (skip, error)"));
    }
    if (d.on_null() != proto::DatasetSpec::ON_NULL_UNSPECIFIED && !d.format().empty() &&
        !record) {
      return absl::InvalidArgumentError(absl::StrCat(
          "work_source.datasets[", k, "] ('", d.name(), "').on_null is set, but format '",
          d.format(), "' has no null records; on_null applies to record formats"));
    }
    if (!d.dtype().empty() && d.dtype() != "uint16" && d.dtype() != "uint32") {
      return absl::InvalidArgumentError(absl::StrCat("work_source.datasets[", k, "].dtype '",
                                                     d.dtype(), "' unknown (uint16, uint32)"));
    }
  }
  // Per-dataset policies, stop_after_passes, max_repeats (repetition.h refuses the
  // combinations upstream refuses, naming the dataset).
  RETURN_IF_ERROR(ResolveRepetition(ws).status());
  RETURN_IF_ERROR(ValidateBlockShuffle(ws.shuffle_block_size()));
  if (ws.weights_size() != 0 && ws.weights_size() != ws.datasets_size()) {
    return absl::InvalidArgumentError(absl::StrCat("work_source.weights has ", ws.weights_size(),
                                                   " entries, datasets has ", ws.datasets_size()));
  }
  for (int k = 0; k < ws.weights_size(); ++k) {
    // NaN fails `> 0`; infinity would swallow every other dataset's share.
    if (!(ws.weights(k) > 0) || !std::isfinite(ws.weights(k))) {
      return absl::InvalidArgumentError(absl::StrCat(
          "work_source.weights[", k, "] (mixture weight of dataset '", ws.datasets(k).name(),
          "') = ", ws.weights(k), ": must be a finite number > 0"));
    }
  }
  return absl::OkStatus();
}

// tokenize reads JSONL or record-format (Parquet, MDS) text: a dataset declared in
// another format is refused here, before any I/O (an auto-detected one is refused by
// Dataset::Open).
absl::Status CheckTextDatasets(const proto::WorkSourceSpec& ws) {
  for (int k = 0; k < ws.datasets_size(); ++k) {
    const auto& d = ws.datasets(k);
    if (!d.format().empty() && d.format() != "jsonl" &&
        RecordFormats::Global().Find(d.format()) == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "work_source.datasets[", k, "] ('", d.name(), "').format '", d.format(),
          "': the tokenize operator reads text from JSONL datasets (fmt=\"jsonl\"); "
          "drop tokenize to read pre-tokenized data"));
    }
  }
  return absl::OkStatus();
}

// The defaults of the algorithm's own fields (packers.h). A wrap spec gets none, so it
// serializes, and hashes, as before those fields existed. An unknown algorithm is left
// for LaneOptions::FromSpec to refuse.
void ResolvePackFlatDefaults(proto::PackFlatSpec* pack) {
  // The default spelled out is the default: it hashes as unset (as "streaming" does).
  if (pack->flush_strategy() == "fifo") pack->clear_flush_strategy();
  const absl::StatusOr<PackAlgorithm> algorithm = ParsePackAlgorithm(pack->algorithm());
  if (!algorithm.ok()) return;
  if ((*algorithm == PackAlgorithm::kFirstFit || *algorithm == PackAlgorithm::kBestFit) &&
      !pack->has_drop_oversized()) {
    pack->set_drop_oversized(true);
  }
  if (*algorithm == PackAlgorithm::kBestFitWrap) {
    if (pack->candidate_pool_size() == 0) pack->set_candidate_pool_size(kDefaultCandidatePoolSize);
    if (pack->max_candidate_age() == 0) {
      pack->set_max_candidate_age(kCandidateAgeFactor * pack->candidate_pool_size());
    }
  }
}

// pack_sequences: pack_flat's defaults, except that a record's segment boundaries are
// published instead of positions (emit_positions unset = false) and a padding
// algorithm's cells after the segments need no chosen id (pad_token_id unset = 0).
void ResolvePackSequencesDefaults(proto::PackFlatSpec* pack) {
  if (pack->algorithm().empty()) pack->set_algorithm("wrap");
  if (!pack->has_emit_positions()) pack->set_emit_positions(false);
  const absl::StatusOr<PackAlgorithm> algorithm = ParsePackAlgorithm(pack->algorithm());
  if (algorithm.ok() && *algorithm != PackAlgorithm::kWrap && !pack->has_pad_token_id()) {
    pack->set_pad_token_id(0);
  }
  ResolvePackFlatDefaults(pack);
}

}  // namespace

absl::StatusOr<ResolvedPipeline> ResolvePipeline(proto::PipelineSpec spec, uint32_t dp_degree) {
  if (spec.format_version() == 0) spec.set_format_version(kFormatVersion);
  if (spec.format_version() != kFormatVersion) {
    return absl::InvalidArgumentError(absl::StrCat("format_version ", spec.format_version(),
                                                   " unsupported (this engine: ", kFormatVersion, ")"));
  }
  if (!spec.has_canonical_replicas()) {
    if (dp_degree > kMaxCanonicalReplicas) {
      return absl::InvalidArgumentError(absl::StrCat(
          "dp_degree=", dp_degree, " exceeds zephond's bound of ", kMaxCanonicalReplicas,
          " data streams (canonical_replicas, which defaults to dp_degree)"));
    }
    spec.set_canonical_replicas(dp_degree);
  }
  // Before the narrowing below and before the other fields: the lane count's error
  // names it whatever else is wrong.
  RETURN_IF_ERROR(CheckCanonicalReplicas(spec.canonical_replicas()));
  RETURN_IF_ERROR(CheckDpDegreeFitsLanes(dp_degree, spec.canonical_replicas()));
  if (spec.mapping_strategy() == proto::PipelineSpec::MAPPING_STRATEGY_UNSPECIFIED) {
    spec.set_mapping_strategy(proto::PipelineSpec::CONTIGUOUS);
  }
  RETURN_IF_ERROR(CheckResolved(spec.mapping_strategy()));
  if (spec.lane_routing() == proto::PipelineSpec::LANE_ROUTING_UNSPECIFIED) {
    spec.set_lane_routing(proto::PipelineSpec::PERMUTE);
  }
  if (spec.flush_every_k_chunks() == 0) spec.set_flush_every_k_chunks(kDefaultFlushEveryKChunks);
  auto* ws = spec.mutable_work_source();
  if (ws->chunk_size() == 0) ws->set_chunk_size(kDefaultChunkSize);
  if (ws->exhausted_policy() == proto::WorkSourceSpec::EXHAUSTED_POLICY_UNSPECIFIED) {
    ws->set_exhausted_policy(proto::WorkSourceSpec::STOP_AFTER_PASSES);
  }
  RETURN_IF_ERROR(CheckResolved(ws->exhausted_policy()));
  if (ws->weight_by() == proto::WorkSourceSpec::WEIGHT_BY_UNSPECIFIED) {
    ws->set_weight_by(proto::WorkSourceSpec::SAMPLES);
  }
  RETURN_IF_ERROR(CheckResolved(ws->weight_by()));
  if (ws->stop_after_passes() == 0) ws->set_stop_after_passes(1);
  for (auto& d : *ws->mutable_datasets()) {
    if (d.format() == "flat") {
      if (d.dtype().empty()) d.set_dtype("uint16");
      if (d.flat_sample_tokens() == 0) d.set_flat_sample_tokens(2048);
    }
    if (d.format() == "jsonl" && !d.field().empty() && d.jsonl_field().empty()) {
      // For JSONL `field` is jsonl_field: one spelling, one spec hash.
      d.set_jsonl_field(d.field());
      d.clear_field();
    }
    if (d.format() == "jsonl" && d.jsonl_field().empty()) d.set_jsonl_field(kDefaultJsonlField);
  }
  RETURN_IF_ERROR(ValidateDatasets(*ws));
  if (ws->schedule_size() > 0) {
    // A curriculum (ScheduledMixtureWorkSource): checked here, before any I/O. A spec
    // without a schedule leaves interpolate unset, so its hash is unchanged.
    if (ws->interpolate() == proto::WorkSourceSpec::INTERPOLATE_UNSPECIFIED) {
      ws->set_interpolate(proto::WorkSourceSpec::STEP);
    }
    RETURN_IF_ERROR(PhaseSchedule::Create(*ws).status());
  }
  if (proto::TokenizeSpec* tokenize = FindMutableTokenize(&spec)) {
    RETURN_IF_ERROR(ResolveTokenize(0, tokenize));
    RETURN_IF_ERROR(CheckTextDatasets(*ws));
  }
  // loss_mask_format VALUES is the default: spelled out, it hashes as unset.
  for (proto::DatasetSpec& d : *spec.mutable_work_source()->mutable_datasets()) {
    if (d.loss_mask_format() == proto::DatasetSpec::VALUES) d.clear_loss_mask_format();
  }
  for (auto& op : *spec.mutable_operators()) {
    if (op.has_pack_flat() && op.pack_flat().algorithm().empty()) {
      op.mutable_pack_flat()->set_algorithm("wrap");
    }
    if (op.has_pack_flat() && !op.pack_flat().has_emit_positions()) {
      op.mutable_pack_flat()->set_emit_positions(true);
    }
    if (op.has_pack_flat()) ResolvePackFlatDefaults(op.mutable_pack_flat());
    if (op.has_pack_sequences()) ResolvePackSequencesDefaults(op.mutable_pack_sequences());
    ResolveReorderDefaults(&op);
    // The guide's default: never a short batch.
    if (op.has_batch() && !op.batch().has_drop_last()) op.mutable_batch()->set_drop_last(true);
  }
  ASSIGN_OR_RETURN(LaneOptions lanes, LaneOptions::FromSpec(spec));
  return ResolvedPipeline{std::move(spec), lanes};
}

absl::StatusOr<proto::PipelineSpec> ResolveSpec(proto::PipelineSpec spec, uint32_t dp_degree) {
  ASSIGN_OR_RETURN(ResolvedPipeline resolved, ResolvePipeline(std::move(spec), dp_degree));
  return std::move(resolved.spec);
}

std::string SpecHash(const proto::PipelineSpec& resolved,
                     const std::vector<std::shared_ptr<const Dataset>>& datasets) {
  // Where the files live is not data: the fingerprints cover what is in them. The
  // options are hashed as strings, as format 1 defined the hash (spec_string_form.h).
  proto::PipelineSpecStringForm hashed = ToStringForm(resolved);
  for (auto& d : *hashed.mutable_work_source()->mutable_datasets()) d.clear_path();
  // Likewise the tokenizer's location (or inline bytes): its fingerprint covers it.
  for (auto& op : *hashed.mutable_operators()) {
    if (op.has_tokenize()) *op.mutable_tokenize() = HashedForm(op.tokenize());
  }
  std::string bytes;
  {
    google::protobuf::io::StringOutputStream raw(&bytes);
    google::protobuf::io::CodedOutputStream out(&raw);
    out.SetSerializationDeterministic(true);
    hashed.SerializeToCodedStream(&out);
  }
  uint64_t h = HashBytes(bytes);
  for (const auto& d : datasets) h = Combine(h, d->Fingerprint());
  return absl::StrFormat("%016x", h);
}

absl::StatusOr<std::vector<std::shared_ptr<const Dataset>>> OpenDatasets(
    const proto::PipelineSpec& spec, const OpenOptions& options, const TextTokenization* text) {
  std::vector<std::shared_ptr<const Dataset>> out;
  for (const auto& d : spec.work_source().datasets()) {
    auto ds = Dataset::Open(d, options, text);
    if (!ds.ok()) {
      return absl::Status(ds.status().code(), absl::StrCat("dataset '", d.name(), "': ",
                                                           ds.status().message()));
    }
    out.push_back(std::shared_ptr<const Dataset>(*std::move(ds)));
  }
  return out;
}

}  // namespace zephon::pipeline
