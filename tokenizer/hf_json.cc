// Tokenizer::FromJson: reads an HF tokenizer.json into HfParts. Every component is
// validated here; anything this library cannot reproduce exactly is refused with the JSON
// path of the component (e.g. "tokenizer.json: pre_tokenizer.pretokenizers[1].type
// 'Whitespace' is not supported"), never discovered mid-run.
#include <simdjson.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "common/status_macros.h"
#include "tokenizer/canonical_json.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace zephon::tokenizer {
namespace {

using simdjson::dom::element;

absl::Status Bad(std::string_view file, std::string_view path, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(Av(file), ": ", Av(path), " ", Av(what)));
}

absl::Status Unsupported(std::string_view path, std::string_view type,
                         std::string_view supported) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", Av(path), ".type '", Av(type),
                                                 "' is not supported (supported: ",
                                                 Av(supported), ")"));
}

using Result = simdjson::simdjson_result<element>;

// Field `key` of `obj`: an error result when obj is not an object or lacks the key.
Result Field(Result obj, std::string_view key) { return obj[key]; }
Result Field(element obj, std::string_view key) { return obj[key]; }

// True when `obj` has `key` with a non-null value.
bool Has(element obj, std::string_view key) {
  element v;
  return !obj[key].get(v) && !v.is_null();
}

// Field `key` of `obj`. REQUIRES: Has(obj, key).
element At(element obj, std::string_view key) {
  element v;
  return obj[key].get(v) ? obj : v;  // obj only when the REQUIRES is broken
}

absl::Status GetString(element obj, std::string_view key, std::string_view path,
                       std::string* out) {
  std::string_view s;
  element v;
  if (!obj.is_object() || obj[key].get(v) || v.get(s)) {
    return Bad("tokenizer.json", absl::StrCat(Av(path), ".", Av(key)), "must be a string");
  }
  out->assign(s);
  return absl::OkStatus();
}

// A bool field; missing or null reads as `fallback`.
absl::Status GetBool(element obj, std::string_view key, std::string_view path, bool fallback,
                     bool* out) {
  element v;
  if (!obj.is_object() || obj[key].get(v) || v.is_null()) {
    *out = fallback;
    return absl::OkStatus();
  }
  if (v.get(*out)) {
    return Bad("tokenizer.json", absl::StrCat(Av(path), ".", Av(key)), "must be true or false");
  }
  return absl::OkStatus();
}

absl::Status TypeOf(element e, std::string_view path, std::string* type) {
  if (!e.is_object()) return Bad("tokenizer.json", path, "must be an object or null");
  return GetString(e, "type", path, type);
}

// {"String": s} patterns only: regex replacements are not supported.
absl::Status StringPattern(element obj, std::string_view path, std::string* out) {
  std::string_view s;
  if (!Field(Field(obj, "pattern"), "String").get(s)) {
    out->assign(s);
    return absl::OkStatus();
  }
  return Bad("tokenizer.json", absl::StrCat(Av(path), ".pattern"),
             "must be {\"String\": ...}; regex patterns are not supported here");
}

absl::Status ParseNormalizer(element e, const std::string& path,
                             std::vector<NormalizerStep>* steps) {
  std::string type;
  RETURN_IF_ERROR(TypeOf(e, path, &type));
  if (type == "Sequence") {
    simdjson::dom::array list;
    if (Field(e, "normalizers").get(list)) {
      return Bad("tokenizer.json", path + ".normalizers", "must be an array");
    }
    size_t i = 0;
    for (element child : list) {
      RETURN_IF_ERROR(
          ParseNormalizer(child, absl::StrCat(path, ".normalizers[", i++, "]"), steps));
    }
    return absl::OkStatus();
  }
  NormalizerStep step;
  if (type == "NFC") {
    step.kind = NormalizerStep::Kind::kNfc;
  } else if (type == "NFKC") {
    step.kind = NormalizerStep::Kind::kNfkc;
  } else if (type == "Replace") {
    step.kind = NormalizerStep::Kind::kReplace;
    RETURN_IF_ERROR(StringPattern(e, path, &step.pattern));
    RETURN_IF_ERROR(GetString(e, "content", path, &step.content));
  } else if (type == "Prepend") {
    step.kind = NormalizerStep::Kind::kPrepend;
    RETURN_IF_ERROR(GetString(e, "prepend", path, &step.content));
  } else {
    return Unsupported(path, type, "NFC, NFKC, Replace, Prepend, Sequence");
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status ParsePrepend(element e, const std::string& path, PreTokenizerStep::Prepend* out) {
  std::string scheme;
  if (Has(e, "prepend_scheme")) {
    RETURN_IF_ERROR(GetString(e, "prepend_scheme", path, &scheme));
  } else {
    bool add_prefix_space;
    RETURN_IF_ERROR(GetBool(e, "add_prefix_space", path, true, &add_prefix_space));
    scheme = add_prefix_space ? "always" : "never";
  }
  if (scheme == "always") *out = PreTokenizerStep::Prepend::kAlways;
  else if (scheme == "first") *out = PreTokenizerStep::Prepend::kFirst;
  else if (scheme == "never") *out = PreTokenizerStep::Prepend::kNever;
  else return Bad("tokenizer.json", path + ".prepend_scheme", "must be always, first or never");
  return absl::OkStatus();
}

absl::Status ParsePreTokenizer(element e, const std::string& path,
                               std::vector<PreTokenizerStep>* steps) {
  std::string type;
  RETURN_IF_ERROR(TypeOf(e, path, &type));
  if (type == "Sequence") {
    simdjson::dom::array list;
    if (Field(e, "pretokenizers").get(list)) {
      return Bad("tokenizer.json", path + ".pretokenizers", "must be an array");
    }
    size_t i = 0;
    for (element child : list) {
      RETURN_IF_ERROR(
          ParsePreTokenizer(child, absl::StrCat(path, ".pretokenizers[", i++, "]"), steps));
    }
    return absl::OkStatus();
  }
  if (!steps->empty() && steps->back().kind == PreTokenizerStep::Kind::kByteLevel) {
    return Bad("tokenizer.json", path,
               "follows a ByteLevel pre-tokenizer; only ByteLevel as the last step is "
               "supported");
  }
  PreTokenizerStep step;
  if (type == "Split") {
    step.kind = PreTokenizerStep::Kind::kSplit;
    std::string_view regex;
    if (Field(Field(e, "pattern"), "Regex").get(regex)) {
      return Bad("tokenizer.json", path + ".pattern",
                 "must be {\"Regex\": ...} with one of the known patterns (GPT-2, Llama 3 / "
                 "cl100k, Qwen 2/3, GPT-4o / o200k)");
    }
    std::optional<SplitPattern> known = RecognizeSplitPattern(regex);
    if (!known.has_value()) {
      return Bad("tokenizer.json", path + ".pattern.Regex",
                 absl::StrCat("'", Av(regex),
                              "' is not a supported regex (supported: the exact patterns of "
                              "GPT-2, Llama 3 / cl100k, Qwen 2/3, GPT-4o / o200k)"));
    }
    step.pattern = *known;
    std::string behavior;
    RETURN_IF_ERROR(GetString(e, "behavior", path, &behavior));
    if (behavior != "Isolated") {
      return Bad("tokenizer.json", path + ".behavior",
                 absl::StrCat("'", behavior, "' is not supported (supported: Isolated)"));
    }
    bool invert;
    RETURN_IF_ERROR(GetBool(e, "invert", path, false, &invert));
    if (invert) return Bad("tokenizer.json", path + ".invert", "true is not supported");
  } else if (type == "ByteLevel") {
    step.kind = PreTokenizerStep::Kind::kByteLevel;
    RETURN_IF_ERROR(GetBool(e, "add_prefix_space", path, true, &step.add_prefix_space));
    RETURN_IF_ERROR(GetBool(e, "use_regex", path, true, &step.use_regex));
  } else if (type == "Metaspace") {
    step.kind = PreTokenizerStep::Kind::kMetaspace;
    RETURN_IF_ERROR(GetString(e, "replacement", path, &step.replacement));
    RETURN_IF_ERROR(ParsePrepend(e, path, &step.prepend_scheme));
    RETURN_IF_ERROR(GetBool(e, "split", path, true, &step.split));
  } else {
    return Unsupported(path, type, "Split, ByteLevel, Metaspace, Sequence");
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

absl::Status ParseDecoder(element e, const std::string& path, std::vector<DecoderStep>* steps) {
  std::string type;
  RETURN_IF_ERROR(TypeOf(e, path, &type));
  if (type == "Sequence") {
    simdjson::dom::array list;
    if (Field(e, "decoders").get(list)) {
      return Bad("tokenizer.json", path + ".decoders", "must be an array");
    }
    size_t i = 0;
    for (element child : list) {
      RETURN_IF_ERROR(
          ParseDecoder(child, absl::StrCat(path, ".decoders[", i++, "]"), steps));
    }
    return absl::OkStatus();
  }
  DecoderStep step;
  if (type == "ByteLevel") {
    step.kind = DecoderStep::Kind::kByteLevel;
  } else if (type == "Replace") {
    step.kind = DecoderStep::Kind::kReplace;
    RETURN_IF_ERROR(StringPattern(e, path, &step.pattern));
    RETURN_IF_ERROR(GetString(e, "content", path, &step.content));
  } else if (type == "ByteFallback") {
    step.kind = DecoderStep::Kind::kByteFallback;
  } else if (type == "Fuse") {
    step.kind = DecoderStep::Kind::kFuse;
  } else if (type == "Strip") {
    step.kind = DecoderStep::Kind::kStrip;
    RETURN_IF_ERROR(GetString(e, "content", path, &step.content));
    int64_t start = 0, stop = 0;
    if (Field(e, "start").get(start) || Field(e, "stop").get(stop)) {
      return Bad("tokenizer.json", path, "needs integer start and stop");
    }
    step.start = static_cast<int>(start);
    step.stop = static_cast<int>(stop);
  } else if (type == "Metaspace") {
    step.kind = DecoderStep::Kind::kMetaspace;
    RETURN_IF_ERROR(GetString(e, "replacement", path, &step.content));
    PreTokenizerStep::Prepend prepend;
    RETURN_IF_ERROR(ParsePrepend(e, path, &prepend));
    step.prepend_scheme = static_cast<DecoderStep::Prepend>(prepend);
  } else {
    return Unsupported(path, type, "ByteLevel, Replace, ByteFallback, Fuse, Strip, Metaspace, Sequence");
  }
  steps->push_back(std::move(step));
  return absl::OkStatus();
}

// The post-processor's single-sequence template: special tokens before and after the text.
absl::Status ParsePostProcessor(element e, const std::string& path,
                                std::vector<int32_t>* prefix, std::vector<int32_t>* suffix,
                                std::vector<std::string>* prefix_names,
                                std::vector<std::string>* suffix_names) {
  std::string type;
  RETURN_IF_ERROR(TypeOf(e, path, &type));
  if (type == "Sequence") {
    simdjson::dom::array list;
    if (Field(e, "processors").get(list)) {
      return Bad("tokenizer.json", path + ".processors", "must be an array");
    }
    size_t i = 0;
    for (element child : list) {
      RETURN_IF_ERROR(ParsePostProcessor(child,
                                              absl::StrCat(path, ".processors[", i++, "]"),
                                              prefix, suffix, prefix_names, suffix_names));
    }
    return absl::OkStatus();
  }
  if (type == "ByteLevel") return absl::OkStatus();  // offsets only; ids unchanged
  if (type != "TemplateProcessing") {
    return Unsupported(path, type, "TemplateProcessing, ByteLevel, Sequence");
  }
  simdjson::dom::array single;
  if (Field(e, "single").get(single)) {
    return Bad("tokenizer.json", path + ".single", "must be an array");
  }
  Result specials = Field(e, "special_tokens");
  bool seen_sequence = false;
  size_t i = 0;
  for (element item : single) {
    const std::string item_path = absl::StrCat(path, ".single[", i++, "]");
    if (Has(item, "Sequence")) {
      seen_sequence = true;
      continue;
    }
    std::string name;
    if (!Has(item, "SpecialToken") ||
        !GetString(At(item, "SpecialToken"), "id", item_path, &name).ok()) {
      return Bad("tokenizer.json", item_path, "must be {\"SpecialToken\": {\"id\": ...}} or "
                                              "{\"Sequence\": ...}");
    }
    simdjson::dom::array ids;
    if (Field(Field(specials, name), "ids").get(ids)) {
      return Bad("tokenizer.json", absl::StrCat(path, ".special_tokens"),
                 absl::StrCat("has no ids for '", name, "', which ", item_path, " names"));
    }
    for (element id : ids) {
      int64_t v;
      if (id.get(v)) return Bad("tokenizer.json", path + ".special_tokens", "ids must be integers");
      (seen_sequence ? suffix : prefix)->push_back(static_cast<int32_t>(v));
    }
    (seen_sequence ? suffix_names : prefix_names)->push_back(name);
  }
  return absl::OkStatus();
}

}  // namespace

// Defined in hf_model_json.cc: the model, added tokens and decode table.
absl::Status ParseHfModel(element root, bool byte_level, bool split_special_tokens,
                          HfParts* parts, std::vector<AddedToken>* added);

namespace {

struct ConfigTokens {
  std::optional<std::string> bos, eos;
};

// bos_token / eos_token of a tokenizer_config.json: a string, {"content": ...} or null.
// On Demand, not DOM: transformers writes model_max_length = int(1e30), an integer the
// DOM parser refuses, and only these two keys are read (the rest is skipped unparsed).
absl::StatusOr<ConfigTokens> ReadConfigTokens(std::string_view config_json) {
  namespace od = simdjson::ondemand;
  const simdjson::padded_string padded(config_json);
  od::parser parser;
  od::document doc;
  od::object config;
  if (parser.iterate(padded).get(doc) || doc.get_object().get(config)) {
    return absl::InvalidArgumentError(
        "tokenizer_config.json: not a valid JSON object; fix or remove it");
  }
  ConfigTokens out;
  for (const char* key : {"bos_token", "eos_token"}) {
    od::value v;
    const simdjson::error_code found = config.find_field_unordered(key).get(v);
    if (found == simdjson::NO_SUCH_FIELD) continue;
    od::json_type type;
    if (found || v.type().get(type)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tokenizer_config.json: malformed JSON at ", key, "; fix or remove the file"));
    }
    if (type == od::json_type::null) continue;
    if (type == od::json_type::object) {
      od::object token;
      const simdjson::error_code content =
          v.get_object().get(token) ? simdjson::TAPE_ERROR
                                    : token.find_field_unordered("content").get(v);
      if (content == simdjson::NO_SUCH_FIELD) continue;
      if (content) {
        return Bad("tokenizer_config.json", key, "must be a string, {\"content\": ...} or null");
      }
    }
    std::string_view name;
    if (v.get_string().get(name)) {
      return Bad("tokenizer_config.json", key, "must be a string, {\"content\": ...} or null");
    }
    (std::string_view(key) == "bos_token" ? out.bos : out.eos) = std::string(name);
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromJson(
    std::string_view json, const TokenizerOptions& options, std::string_view config_json) {
  simdjson::dom::parser parser;
  element root;
  if (auto err = parser.parse(json.data(), json.size()).get(root); err) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer.json: not valid JSON (", simdjson::error_message(err),
        "); pass the tokenizer.json an HF fast tokenizer saves"));
  }
  if (!root.is_object()) return Bad("tokenizer.json", "(root)", "must be an object");
  HfParts parts;
  if (Has(root, "normalizer")) {
    std::vector<NormalizerStep> steps;
    RETURN_IF_ERROR(ParseNormalizer(At(root, "normalizer"), "normalizer", &steps));
    parts.normalizer.emplace(std::move(steps));
  }
  std::vector<PreTokenizerStep> pre_steps;
  if (Has(root, "pre_tokenizer")) {
    RETURN_IF_ERROR(
        ParsePreTokenizer(At(root, "pre_tokenizer"), "pre_tokenizer", &pre_steps));
  }
  const bool byte_level =
      !pre_steps.empty() && pre_steps.back().kind == PreTokenizerStep::Kind::kByteLevel;
  parts.pre_tokenizer = PreTokenizer(std::move(pre_steps));
  if (Has(root, "decoder")) {
    std::vector<DecoderStep> steps;
    RETURN_IF_ERROR(ParseDecoder(At(root, "decoder"), "decoder", &steps));
    parts.decoder = Decoder(std::move(steps), true);
  }
  Common common;
  std::vector<std::string> prefix_names, suffix_names;
  if (Has(root, "post_processor")) {
    RETURN_IF_ERROR(ParsePostProcessor(At(root, "post_processor"), "post_processor",
                                            &common.default_prefix, &common.default_suffix,
                                            &prefix_names, &suffix_names));
  }
  std::vector<AddedToken> added;
  RETURN_IF_ERROR(
      ParseHfModel(root, byte_level, options.split_special_tokens, &parts, &added));

  // BOS/EOS: tokenizer_config.json, else the template, else well-known names.
  auto id_of = [&](const std::string& content) -> std::optional<int32_t> {
    for (const AddedToken& t : added) {
      if (t.content == content) return t.id;
    }
    const int32_t id = parts.bpe->TokenToId(content);
    if (id >= 0) return id;
    return std::nullopt;
  };
  std::string config_names;
  if (!config_json.empty()) {
    ASSIGN_OR_RETURN(const ConfigTokens names, ReadConfigTokens(config_json));
    for (const auto& [key, name] : {std::make_pair("bos_token", names.bos),
                                    std::make_pair("eos_token", names.eos)}) {
      if (!name.has_value()) continue;
      std::optional<int32_t> id = id_of(*name);
      if (!id.has_value()) {
        return Bad("tokenizer_config.json", key,
                   absl::StrCat("'", Av(*name), "' is not a token of tokenizer.json"));
      }
      (std::string_view(key) == "bos_token" ? common.bos : common.eos) = id;
      absl::StrAppend(&config_names, key, "=", *id, ";");
    }
  } else {
    if (!prefix_names.empty()) common.bos = id_of(prefix_names.front());
    if (!suffix_names.empty()) common.eos = id_of(suffix_names.back());
    // Well-known names count only as special added tokens: Qwen's vocabulary spells
    // ordinary entries "<s>" and "</s>", and HF gives it no BOS.
    auto special_id_of = [&](const char* content) -> std::optional<int32_t> {
      for (const AddedToken& t : added) {
        if (t.special && t.content == content) return t.id;
      }
      return std::nullopt;
    };
    for (const char* name : {"<|begin_of_text|>", "<s>", "<bos>", "<|startoftext|>"}) {
      if (!common.bos.has_value()) common.bos = special_id_of(name);
    }
    for (const char* name : {"<|end_of_text|>", "</s>", "<eos>", "<|endoftext|>"}) {
      if (!common.eos.has_value()) common.eos = special_id_of(name);
    }
  }
  if (options.bos_token_id.has_value()) common.bos = options.bos_token_id;
  if (options.eos_token_id.has_value()) common.eos = options.eos_token_id;
  common.window = options.window_for_testing;
  common.max_unsplit_bytes = options.max_unsplit_bytes;
  for (const auto& [what, id] : {std::make_pair("bos_token_id", common.bos),
                                 std::make_pair("eos_token_id", common.eos)}) {
    if (id.has_value() && (*id < 0 || *id >= parts.vocab_size)) {
      return absl::InvalidArgumentError(absl::StrCat(what, " ", *id, " is outside the vocabulary [0, ",
                                                     parts.vocab_size, ")"));
    }
  }

  std::string canonical;
  AppendCanonicalJson(root, &canonical);
  absl::StrAppend(&canonical, "\nsplit_special_tokens=", options.split_special_tokens,
                  ";bos=", common.bos.value_or(-1), ";eos=", common.eos.value_or(-1), ";",
                  config_names);
  common.fingerprint = absl::StrCat("sha256:", Sha256Hex(canonical));
  return std::unique_ptr<Tokenizer>(new HfTokenizer(std::move(common), std::move(parts)));
}

}  // namespace zephon::tokenizer
