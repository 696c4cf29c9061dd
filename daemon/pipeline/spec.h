// Spec resolution and the spec hash.
//
// ResolveSpec fills every default so that the hash always covers effective values:
//   format_version 1; canonical_replicas = dp_degree; mapping_strategy CONTIGUOUS;
//   lane_routing PERMUTE; work_source.chunk_size 1024; exhausted_policy
//   STOP_AFTER_PASSES; weight_by SAMPLES (hashed only when TOKENS:
//   spec_string_form.h); stop_after_passes 1; flush_every_k_chunks 8; pack_flat
//   algorithm "wrap" (first_fit/best_fit: drop_oversized true; best_fit_wrap:
//   candidate_pool_size 1024, max_candidate_age 8 x that; wrap gets none of these, so
//   wrap specs hash as before they existed); for format "flat" datasets dtype "uint16" and
//   flat_sample_tokens 2048, for format "jsonl" datasets jsonl_field "input_ids"
//   (a JSONL dataset's `field` is moved into jsonl_field, so both spellings hash alike;
//   record formats keep field and on_null as set, unset when unset;
//   auto-detected datasets keep their empty fields; the detected format enters the
//   hash through Dataset::Fingerprint). shuffle_block_size is kept verbatim ("auto" /
//   "global" depend on the data; WorkSource resolves them, and the data enters the
//   hash through the fingerprints).
// plus a tokenize operator's defaults (ResolveTokenize, tokenize_spec.h),
// and validates it (INVALID_ARGUMENT naming the option and value): format_version 1,
// known enum values and strings, datasets non-empty with unique non-empty names and paths, weights,
// shuffle_block_size syntax, max_repeats only with exhausted_policy REPEAT, the
// operator list (tokenize only with JSONL or record-format datasets), field vs
// jsonl_field, on_null only for record formats (record_formats.h), lane_routing and the lane count (LaneOptions::FromSpec, CheckCanonicalReplicas),
// 1 <= dp_degree <= canonical_replicas (CheckDpDegreeFitsLanes). An unset
// canonical_replicas with dp_degree over zephond's lane bound names dp_degree.
//
// SpecHash = 16 lowercase hex digits of h, where h0 = HashBytes(deterministic
// protobuf serialization of ToStringForm(resolved spec) (spec_string_form.h: the enum
// options as format 1's strings, so no existing hash moved) with every dataset's
// `path` cleared) and
// h = Combine(h, fingerprint_k) over the datasets in order. The path is location, not
// data (the fingerprints cover the files: names, sample counts, sizes), so the same
// files read from another directory or from S3 give the same hash, and a checkpoint
// taken on one restores on the other. A tokenize operator enters h0 without its source
// (tokenizer_path, inline tokenizer_json: tokenize_spec.h's HashedForm): its fingerprint
// covers the tokenizer, so REQUIRES the fingerprint filled (daemon/tokenizers.h does it
// at attach). Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_SPEC_H_
#define ZEPHON_DAEMON_PIPELINE_SPEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/dataset.h"
#include "daemon/pipeline/formats/text_tokenization.h"
#include "daemon/pipeline/batching/lane_stream.h"
#include "proto/spec.pb.h"

namespace zephon::pipeline {

inline constexpr uint32_t kFormatVersion = 1;

// A resolved spec and the lane options read from it (one read of the operator list).
struct ResolvedPipeline {
  proto::PipelineSpec spec;  // every default filled: what the spec hash covers
  LaneOptions lanes;
};

absl::StatusOr<ResolvedPipeline> ResolvePipeline(proto::PipelineSpec spec, uint32_t dp_degree);
// ResolvePipeline(spec, dp_degree)->spec.
absl::StatusOr<proto::PipelineSpec> ResolveSpec(proto::PipelineSpec spec, uint32_t dp_degree);

std::string SpecHash(const proto::PipelineSpec& resolved,
                     const std::vector<std::shared_ptr<const Dataset>>& datasets);

// Opens every dataset of the spec, in order (errors name the dataset). `text`, the
// spec's tokenize operator (daemon/tokenizers.h's PrepareTokenize), makes them text
// datasets; null without one.
absl::StatusOr<std::vector<std::shared_ptr<const Dataset>>> OpenDatasets(
    const proto::PipelineSpec& spec, const OpenOptions& options = {},
    const TextTokenization* text = nullptr);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_SPEC_H_
