// The "model" (BPE) and "added_tokens" sections of a tokenizer.json, for FromJson.
#include <simdjson.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tokenizer/decoder.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/unicode.h"

namespace zephon::tokenizer {
namespace {

using simdjson::dom::element;

absl::Status Bad(std::string_view path, std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer.json: ", Av(path), " ", Av(what)));
}

// A byte-level token (GPT-2's printable stand-ins) as raw bytes; false when a character
// is not a stand-in (the token can then never be produced from byte-level input).
bool ByteLevelToBytes(std::string_view token, std::string* bytes) {
  bytes->clear();
  size_t i = 0;
  while (i < token.size()) {
    int len;
    const int b = ByteOfByteLevelChar(DecodeUtf8(token, i, &len));
    if (b < 0) return false;
    bytes->push_back(static_cast<char>(b));
    i += len;
  }
  return true;
}

// An optional string field: missing, null or "" mean unset.
absl::Status OptionalString(element model, std::string_view key, std::optional<std::string>* out) {
  element v;
  if (model[key].get(v) || v.is_null()) return absl::OkStatus();
  std::string_view s;
  if (v.get(s)) return Bad(absl::StrCat("model.", Av(key)), "must be a string or null");
  if (!s.empty()) *out = std::string(s);
  return absl::OkStatus();
}

absl::Status OptionalBool(element model, std::string_view key, bool* out) {
  element v;
  if (model[key].get(v) || v.is_null()) return absl::OkStatus();
  if (v.get(*out)) return Bad(absl::StrCat("model.", Av(key)), "must be true or false");
  return absl::OkStatus();
}

absl::Status ParseAddedTokens(element root, std::vector<AddedToken>* added) {
  element list_element;
  if (root["added_tokens"].get(list_element) || list_element.is_null()) return absl::OkStatus();
  simdjson::dom::array list;
  if (list_element.get(list)) return Bad("added_tokens", "must be an array");
  size_t i = 0;
  for (element t : list) {
    const std::string path = absl::StrCat("added_tokens[", i++, "]");
    AddedToken token;
    std::string_view content;
    int64_t id;
    if (t["content"].get(content)) return Bad(path + ".content", "must be a string");
    if (t["id"].get(id) || id < 0 || id > INT32_MAX) {
      return Bad(path + ".id", "must be a non-negative 32-bit integer");
    }
    token.content = std::string(content);
    token.id = static_cast<int32_t>(id);
    for (auto [key, field] : {std::make_pair("special", &token.special),
                              std::make_pair("single_word", &token.single_word),
                              std::make_pair("lstrip", &token.lstrip),
                              std::make_pair("rstrip", &token.rstrip),
                              std::make_pair("normalized", &token.normalized)}) {
      element v;
      if (t[key].get(v) || v.is_null()) continue;
      if (v.get(*field)) return Bad(absl::StrCat(path, ".", Av(key)), "must be true or false");
    }
    added->push_back(std::move(token));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseHfModel(element root, bool byte_level, bool split_special_tokens,
                          HfParts* parts, std::vector<AddedToken>* added) {
  element model;
  if (root["model"].get(model) || !model.is_object()) {
    return Bad("model", "must be an object");
  }
  std::string_view type;
  if (!model["type"].get(type) && type != "BPE") {
    return absl::InvalidArgumentError(absl::StrCat(
        "tokenizer.json: model.type '", Av(type),
        "' is not supported (supported: BPE; load a SentencePiece .model for Unigram)"));
  }
  element dropout;
  if (!model["dropout"].get(dropout) && !dropout.is_null()) {
    double d = 0;
    if (dropout.get(d) || d != 0) return Bad("model.dropout", "must be null (dropout is random)");
  }
  BpeOptions options;
  options.byte_units = byte_level;
  std::optional<std::string> prefix, suffix;
  RETURN_IF_ERROR(OptionalString(model, "continuing_subword_prefix", &prefix));
  RETURN_IF_ERROR(OptionalString(model, "end_of_word_suffix", &suffix));
  if (prefix.has_value() || suffix.has_value()) {
    return Bad(prefix.has_value() ? "model.continuing_subword_prefix" : "model.end_of_word_suffix",
               "is not supported (only null or \"\")");
  }
  RETURN_IF_ERROR(OptionalString(model, "unk_token", &options.unk_token));
  for (auto [key, field] : {std::make_pair("byte_fallback", &options.byte_fallback),
                            std::make_pair("ignore_merges", &options.ignore_merges),
                            std::make_pair("fuse_unk", &options.fuse_unk)}) {
    RETURN_IF_ERROR(OptionalBool(model, key, field));
  }

  simdjson::dom::object vocab_object;
  if (model["vocab"].get(vocab_object)) return Bad("model.vocab", "must be an object");
  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(vocab_object.size());
  std::string bytes;
  int32_t vocab_size = 0;
  for (auto field : vocab_object) {
    int64_t id;
    if (field.value.get(id) || id < 0 || id > INT32_MAX) {
      return Bad(absl::StrCat("model.vocab['", Av(field.key), "']"),
                 "must be a non-negative 32-bit integer id");
    }
    parts->decode_tokens[static_cast<int32_t>(id)] = std::string(field.key);
    vocab_size = std::max<int32_t>(vocab_size, static_cast<int32_t>(id) + 1);
    if (!byte_level) {
      vocab.emplace_back(std::string(field.key), static_cast<int32_t>(id));
    } else if (ByteLevelToBytes(field.key, &bytes)) {
      vocab.emplace_back(bytes, static_cast<int32_t>(id));
    }
  }

  simdjson::dom::array merge_list;
  if (model["merges"].get(merge_list)) return Bad("model.merges", "must be an array");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merge_list.size());
  size_t rank = 0;
  for (element m : merge_list) {
    std::string a, b;
    std::string_view s;
    simdjson::dom::array pair;
    if (!m.get(s)) {
      // "a b": tokens never contain spaces in this form.
      const size_t space = s.find(' ');
      if (space == std::string_view::npos || s.find(' ', space + 1) != std::string_view::npos) {
        return Bad(absl::StrCat("model.merges[", rank, "]"),
                   absl::StrCat("'", Av(s), "' must be two tokens separated by one space"));
      }
      a = std::string(s.substr(0, space));
      b = std::string(s.substr(space + 1));
    } else if (!m.get(pair) && pair.size() == 2 && !pair.at(0).get(s)) {
      a = std::string(s);
      if (pair.at(1).get(s)) return Bad(absl::StrCat("model.merges[", rank, "]"), "must hold strings");
      b = std::string(s);
    } else {
      return Bad(absl::StrCat("model.merges[", rank, "]"),
                 "must be \"a b\" or [\"a\", \"b\"]");
    }
    ++rank;
    if (byte_level) {
      std::string ab, bb;
      // A merge of unreachable tokens is dropped; the others keep their relative order.
      if (!ByteLevelToBytes(a, &ab) || !ByteLevelToBytes(b, &bb)) continue;
      a = std::move(ab);
      b = std::move(bb);
    }
    merges.emplace_back(std::move(a), std::move(b));
  }
  absl::StatusOr<std::unique_ptr<Bpe>> bpe =
      Bpe::Create(std::move(vocab), merges, options, "tokenizer.json: model");
  if (!bpe.ok()) return bpe.status();
  parts->bpe = *std::move(bpe);

  RETURN_IF_ERROR(ParseAddedTokens(root, added));
  std::vector<AddedToken> raw, normalized;
  for (const AddedToken& t : *added) {
    parts->decode_tokens[t.id] = t.content;
    vocab_size = std::max(vocab_size, t.id + 1);
    (t.normalized ? normalized : raw).push_back(t);
  }
  // HF matches normalized tokens by their normalized content (e.g. "▁foo" under Llama 2's
  // Prepend), in the normalized pieces left after the raw-text pass.
  if (parts->normalizer.has_value()) {
    for (AddedToken& t : normalized) {
      RETURN_IF_ERROR(parts->normalizer->Apply(&t.content));
    }
  }
  if (!raw.empty()) parts->raw_added = std::make_unique<AddedTokens>(raw, split_special_tokens);
  if (!normalized.empty()) {
    parts->normalized_added = std::make_unique<AddedTokens>(normalized, split_special_tokens);
  }
  parts->vocab_size = vocab_size;
  return absl::OkStatus();
}

}  // namespace zephon::tokenizer
