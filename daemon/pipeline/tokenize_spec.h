// The `tokenize` operator of a spec (proto::TokenizeSpec): its defaults, its checks, its
// description, and the TextTokenization (formats/text_tokenization.h) the formats layer
// reads, built from it and a loaded tokenizer.
//
// ResolveTokenize fills the defaults (field "text", special_tokens BOS_EOS, on_missing
// ERROR) and refuses, with INVALID_ARGUMENT naming `operators[i] tokenize` and the value:
// no source or both sources (tokenizer_path, tokenizer_json), tokenizer_config_json
// without tokenizer_json, an unknown enum value, a negative bos/eos id, max_length 0,
// truncation together with split_long_samples, either of them without max_length, and
// max_length without either (it would change nothing); fields with `field`, an empty or
// repeated name in fields, loss_on without fields or naming a field not in fields (or
// twice), special_tokens TOKENIZER_DEFAULT with 2+ fields, keep_payload with fields. One name in fields without
// loss_on is moved into field. With fields, field stays unset.
// Loading the tokenizer is the daemon's (daemon/tokenizers.h); the fingerprint it sets
// is what the spec hash covers, never the source (HashedForm).
// The enums' names ("bos_eos", "skip") are OptionName's (spec_string_form.h).
// Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_TOKENIZE_SPEC_H_
#define ZEPHON_DAEMON_PIPELINE_TOKENIZE_SPEC_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/text_tokenization.h"
#include "proto/spec.pb.h"
#include "tokenizer/tokenizer.h"

namespace zephon::pipeline {

// Fills the defaults of operators[index] and checks it (see the file comment).
absl::Status ResolveTokenize(int index, proto::TokenizeSpec* tokenize);

// The spec's tokenize operator (operators[0]), or null when it has none.
const proto::TokenizeSpec* FindTokenize(const proto::PipelineSpec& spec);
proto::TokenizeSpec* FindMutableTokenize(proto::PipelineSpec* spec);

// The tokenizer's options a resolved TokenizeSpec asks for (bos/eos overrides,
// split_special_tokens): what loading must pass to Tokenizer::Load / FromJson.
tokenizer::TokenizerOptions TokenizerOptionsOf(const proto::TokenizeSpec& resolved);

// The TextTokenization of a resolved TokenizeSpec and its loaded tokenizer (not null).
// FAILED_PRECONDITION (CheckSpecialTokens's) when special_tokens needs a BOS or EOS the
// tokenizer lacks.
absl::StatusOr<TextTokenization> MakeTextTokenization(
    const proto::TokenizeSpec& resolved, std::shared_ptr<const tokenizer::Tokenizer> tokenizer);

// The operator as the spec hash covers it: the source (tokenizer_path, tokenizer_json,
// tokenizer_config_json) and keep_payload (it changes no sample) cleared, the fingerprint
// and every other option kept.
proto::TokenizeSpec HashedForm(const proto::TokenizeSpec& resolved);

// One line for explain and logs: source (a path, or "inline tokenizer.json, N bytes"),
// fingerprint and every option. Never the inline bytes themselves.
std::string DescribeTokenize(const proto::TokenizeSpec& resolved);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_TOKENIZE_SPEC_H_
