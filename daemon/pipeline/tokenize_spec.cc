#include "daemon/pipeline/tokenize_spec.h"

#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "daemon/pipeline/spec_string_form.h"

namespace zephon::pipeline {
namespace {

absl::Status Invalid(int index, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("operators[", index, "] tokenize: ", what));
}

// CheckResolved's error, prefixed with the operator's index.
absl::Status AtIndex(int index, absl::Status status) {
  if (status.ok()) return status;
  return absl::InvalidArgumentError(absl::StrCat("operators[", index, "] ", status.message()));
}

tokenizer::SpecialTokens ModeOf(proto::TokenizeSpec::SpecialTokens value) {
  switch (value) {
    case proto::TokenizeSpec::BOS: return tokenizer::SpecialTokens::kBos;
    case proto::TokenizeSpec::EOS: return tokenizer::SpecialTokens::kEos;
    case proto::TokenizeSpec::NONE: return tokenizer::SpecialTokens::kNone;
    case proto::TokenizeSpec::TOKENIZER_DEFAULT:
      return tokenizer::SpecialTokens::kTokenizerDefault;
    default: return tokenizer::SpecialTokens::kBosEos;  // BOS_EOS (resolved specs only)
  }
}

// `fields` (prompt/completion) and `loss_on`: a single field in `fields` without
// loss_on is moved into `field` (one spelling, one spec hash).
absl::Status ResolveFields(int index, proto::TokenizeSpec* t) {
  if (t->fields_size() == 0) {
    if (t->loss_on_size() > 0) {
      return Invalid(index, "loss_on needs fields (the fields tokenized and concatenated, "
                            "e.g. fields=[\"prompt\", \"completion\"], loss_on=[\"completion\"])");
    }
    return absl::OkStatus();
  }
  if (!t->field().empty()) {
    return Invalid(index, absl::StrCat("both field ('", t->field(), "') and fields are set; "
                                       "pass the fields in one of them"));
  }
  std::set<std::string> names;
  for (const std::string& f : t->fields()) {
    if (f.empty()) return Invalid(index, "fields holds an empty name");
    if (!names.insert(f).second) {
      return Invalid(index, absl::StrCat("fields names '", f, "' twice"));
    }
  }
  std::set<std::string> trained;
  for (const std::string& f : t->loss_on()) {
    if (names.count(f) == 0) {
      return Invalid(index, absl::StrCat("loss_on names '", f, "', which is not one of fields [",
                                         absl::StrJoin(t->fields(), ", "), "]"));
    }
    if (!trained.insert(f).second) {
      return Invalid(index, absl::StrCat("loss_on names '", f, "' twice"));
    }
  }
  if (t->fields_size() > 1 && t->special_tokens() == proto::TokenizeSpec::TOKENIZER_DEFAULT) {
    return Invalid(index, "special_tokens 'tokenizer_default' cannot be split across several "
                          "fields (its post_processor wraps one text); use bos_eos, bos, eos "
                          "or none");
  }
  if (t->fields_size() == 1 && t->loss_on_size() == 0) {
    const std::string only = t->fields(0);
    t->clear_fields();
    t->set_field(only);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ResolveTokenize(int index, proto::TokenizeSpec* t) {
  const bool has_path = !t->tokenizer_path().empty();
  const bool has_json = !t->tokenizer_json().empty();
  if (has_path && has_json) {
    return Invalid(index, absl::StrCat("both tokenizer_path ('", t->tokenizer_path(),
                                       "') and tokenizer_json (", t->tokenizer_json().size(),
                                       " bytes) are set; pass one tokenizer"));
  }
  if (!has_path && !has_json) {
    return Invalid(index, "no tokenizer: set tokenizer_path (a tokenizer.json, an HF model "
                          "directory or a SentencePiece .model, local or s3://) or "
                          "tokenizer_json (the tokenizer.json text)");
  }
  if (!t->tokenizer_config_json().empty() && !has_json) {
    return Invalid(index, "tokenizer_config_json goes with tokenizer_json only (a model "
                          "directory's tokenizer_config.json is read from tokenizer_path)");
  }
  RETURN_IF_ERROR(ResolveFields(index, t));
  if (t->keep_payload() && t->fields_size() > 0) {
    return Invalid(index, absl::StrCat("keep_payload (preserve_upstream_payload) keeps one text "
                                       "field, not fields [", absl::StrJoin(t->fields(), ", "),
                                       "]: tokenize one field, or drop keep_payload"));
  }
  if (t->field().empty() && t->fields_size() == 0) t->set_field(kDefaultTextField);
  if (t->special_tokens() == proto::TokenizeSpec::SPECIAL_TOKENS_UNSPECIFIED) {
    t->set_special_tokens(proto::TokenizeSpec::BOS_EOS);
  }
  RETURN_IF_ERROR(AtIndex(index, CheckResolved(t->special_tokens())));
  if (t->on_missing() == proto::TokenizeSpec::ON_MISSING_UNSPECIFIED) {
    t->set_on_missing(proto::TokenizeSpec::ERROR);
  }
  RETURN_IF_ERROR(AtIndex(index, CheckResolved(t->on_missing())));
  if (t->has_bos_token_id() && t->bos_token_id() < 0) {
    return Invalid(index, absl::StrCat("bos_token_id ", t->bos_token_id(),
                                       " is not a token id (>= 0)"));
  }
  if (t->has_eos_token_id() && t->eos_token_id() < 0) {
    return Invalid(index, absl::StrCat("eos_token_id ", t->eos_token_id(),
                                       " is not a token id (>= 0)"));
  }
  if (t->has_max_length() && t->max_length() == 0) {
    return Invalid(index, "max_length 0: expected a number of tokens >= 1 (or unset)");
  }
  if (t->truncation() && t->split_long_samples()) {
    return Invalid(index, "truncation and split_long_samples are both set; choose one "
                          "(truncation drops the tokens past max_length, "
                          "split_long_samples makes more samples of them)");
  }
  const char* long_option = t->truncation() ? "truncation" : "split_long_samples";
  if ((t->truncation() || t->split_long_samples()) && !t->has_max_length()) {
    return Invalid(index, absl::StrCat(long_option, " needs max_length (the longest sample "
                                       "in tokens)"));
  }
  if (t->has_max_length() && !t->truncation() && !t->split_long_samples()) {
    return Invalid(index, absl::StrCat("max_length ", t->max_length(),
                                       " without truncation or split_long_samples changes "
                                       "nothing; set one of them, or leave max_length unset"));
  }
  return absl::OkStatus();
}

const proto::TokenizeSpec* FindTokenize(const proto::PipelineSpec& spec) {
  if (spec.operators_size() == 0 || !spec.operators(0).has_tokenize()) return nullptr;
  return &spec.operators(0).tokenize();
}

proto::TokenizeSpec* FindMutableTokenize(proto::PipelineSpec* spec) {
  if (spec->operators_size() == 0 || !spec->operators(0).has_tokenize()) return nullptr;
  return spec->mutable_operators(0)->mutable_tokenize();
}

tokenizer::TokenizerOptions TokenizerOptionsOf(const proto::TokenizeSpec& resolved) {
  tokenizer::TokenizerOptions options;
  options.split_special_tokens = resolved.split_special_tokens();
  if (resolved.has_bos_token_id()) options.bos_token_id = resolved.bos_token_id();
  if (resolved.has_eos_token_id()) options.eos_token_id = resolved.eos_token_id();
  return options;
}

absl::StatusOr<TextTokenization> MakeTextTokenization(
    const proto::TokenizeSpec& resolved, std::shared_ptr<const tokenizer::Tokenizer> tokenizer) {
  TextTokenization out;
  out.special_tokens = ModeOf(resolved.special_tokens());
  if (absl::Status s = tokenizer->CheckSpecialTokens(out.special_tokens); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("tokenize special_tokens='", OptionName(resolved.special_tokens()),
                     "' with tokenizer ", DescribeTokenize(resolved), ": ", s.message()));
  }
  out.tokenizer = std::move(tokenizer);
  out.field = resolved.field();
  out.max_length = resolved.max_length();
  out.long_samples = resolved.truncation()           ? TextTokenization::LongSamples::kTruncate
                     : resolved.split_long_samples() ? TextTokenization::LongSamples::kSplit
                                                     : TextTokenization::LongSamples::kKeep;
  out.skip_missing = resolved.on_missing() == proto::TokenizeSpec::SKIP;
  out.keep_payload = resolved.keep_payload();
  if (resolved.fields_size() > 0) {
    out.fields.assign(resolved.fields().begin(), resolved.fields().end());
    out.field = out.fields.front();  // what errors of one-column readers name
    if (resolved.loss_on_size() > 0) {
      const std::set<std::string> trained(resolved.loss_on().begin(), resolved.loss_on().end());
      for (const std::string& f : out.fields) out.loss_on.push_back(trained.count(f) > 0);
    }
  }
  return out;
}

proto::TokenizeSpec HashedForm(const proto::TokenizeSpec& resolved) {
  proto::TokenizeSpec hashed = resolved;
  hashed.clear_tokenizer_path();
  hashed.clear_tokenizer_json();
  hashed.clear_tokenizer_config_json();
  // Keeping the text beside the ids changes no sample, token or order: a checkpoint
  // taken with it restores without it and back.
  hashed.clear_keep_payload();
  return hashed;
}

std::string DescribeTokenize(const proto::TokenizeSpec& t) {
  std::string s = t.tokenizer_path().empty()
                      ? absl::StrCat("inline tokenizer.json")
                      : absl::StrCat("'", t.tokenizer_path(), "'");
  if (!t.tokenizer_json().empty()) absl::StrAppend(&s, " (", t.tokenizer_json().size(), " bytes)");
  absl::StrAppend(&s, " fingerprint=", t.fingerprint().empty() ? "?" : t.fingerprint(),
                  t.fields_size() == 0
                      ? absl::StrCat(" field='", t.field(), "'")
                      : absl::StrCat(" fields=[", absl::StrJoin(t.fields(), ", "), "]"),
                  " special_tokens=", OptionName(t.special_tokens()));
  if (t.loss_on_size() > 0) {
    absl::StrAppend(&s, " loss_on=[", absl::StrJoin(t.loss_on(), ", "), "]");
  }
  if (t.has_bos_token_id()) absl::StrAppend(&s, " bos_token_id=", t.bos_token_id());
  if (t.has_eos_token_id()) absl::StrAppend(&s, " eos_token_id=", t.eos_token_id());
  if (t.has_max_length()) absl::StrAppend(&s, " max_length=", t.max_length());
  if (t.truncation()) absl::StrAppend(&s, " truncation");
  if (t.split_long_samples()) absl::StrAppend(&s, " split_long_samples");
  if (t.split_special_tokens()) absl::StrAppend(&s, " split_special_tokens");
  absl::StrAppend(&s, " on_missing=", OptionName(t.on_missing()));
  if (t.keep_payload()) absl::StrAppend(&s, " keep_payload");
  return s;
}

}  // namespace zephon::pipeline
