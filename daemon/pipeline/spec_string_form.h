// The spec's enum options and their string form.
//
// mapping_strategy, lane_routing and work_source.exhausted_policy were strings in
// format 1 ("interleaved", "modulo", "repeat") and are proto enums now. Each value's
// string is its enum value name in lower case: the Python API's spelling, the one
// error messages and `explain` show, and the one the spec hash covers. The tokenize
// operator's enums (special_tokens, on_missing) were enums from the start: their
// names are here for errors and explain, and the hash covers their numbers.
//
// Why the hash keeps the string form: the spec hash is the deterministic serialization
// of the resolved spec, and restore refuses a checkpoint whose hash differs. Hashing
// the enum form would move every existing checkpoint's hash. So SpecHash serializes
// ToStringForm(spec): a PipelineSpecStringForm (spec_string_form.proto) holding the
// same fields at the same numbers, the three options as the strings format 1 wrote.
// Fields added to PipelineSpec later need no change here: they are carried as unknown
// fields, serialized after the known ones, so they enter the hash when set and leave
// the hash of every spec that does not set them unchanged. One exception:
// work_source.weight_by, a later enum that resolution fills (SAMPLES), is left out of
// the string form when SAMPLES, so that "samples" (the only behaviour before it
// existed) and unset hash as before; TOKENS is carried as unknown field 11.
//
// UpgradeStringOptions reads a spec written in format 1 (a checkpoint's
// CheckpointState.spec): its strings arrive as unknown fields 5, 6 and 7, and become
// the enum fields.
// Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_SPEC_STRING_FORM_H_
#define ZEPHON_DAEMON_PIPELINE_SPEC_STRING_FORM_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/pipeline/spec_string_form.pb.h"
#include "proto/spec.pb.h"

namespace zephon::pipeline {

// "contiguous", "interleaved"; "" for *_UNSPECIFIED; the number for a value this
// build does not know.
std::string OptionName(proto::PipelineSpec::MappingStrategy value);
std::string OptionName(proto::PipelineSpec::LaneRouting value);
std::string OptionName(proto::WorkSourceSpec::ExhaustedPolicy value);
std::string OptionName(proto::WorkSourceSpec::WeightBy value);
std::string OptionName(proto::TokenizeSpec::SpecialTokens value);
std::string OptionName(proto::TokenizeSpec::OnMissing value);

// The value named `name` (lower case); INVALID_ARGUMENT naming `option`, the value and
// the valid names otherwise ("" is *_UNSPECIFIED).
absl::StatusOr<proto::PipelineSpec::MappingStrategy> ParseMappingStrategy(
    const std::string& name);
absl::StatusOr<proto::PipelineSpec::LaneRouting> ParseLaneRouting(const std::string& name);
absl::StatusOr<proto::WorkSourceSpec::ExhaustedPolicy> ParseExhaustedPolicy(
    const std::string& name);
absl::StatusOr<proto::WorkSourceSpec::WeightBy> ParseWeightBy(const std::string& name);

// OK for a known, non-UNSPECIFIED value; INVALID_ARGUMENT naming the option, the value
// and the valid names otherwise.
absl::Status CheckResolved(proto::PipelineSpec::MappingStrategy value);
absl::Status CheckResolved(proto::PipelineSpec::LaneRouting value);
absl::Status CheckResolved(proto::WorkSourceSpec::ExhaustedPolicy value);
absl::Status CheckResolved(proto::WorkSourceSpec::WeightBy value);
absl::Status CheckResolved(proto::TokenizeSpec::SpecialTokens value);
absl::Status CheckResolved(proto::TokenizeSpec::OnMissing value);

// The spec in format 1's schema (see above).
proto::PipelineSpecStringForm ToStringForm(const proto::PipelineSpec& spec);

// Moves format 1's string options (unknown fields 5 and 6 of the spec, 7 of its
// work_source) into the enum fields; a spec without them is left as it is.
// DATA_LOSS naming the option when a string is not one of its values.
absl::Status UpgradeStringOptions(proto::PipelineSpec* spec);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_SPEC_STRING_FORM_H_
