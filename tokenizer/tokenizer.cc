#include "tokenizer/tokenizer.h"

#include <sys/stat.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/file_io.h"
#include "common/status_macros.h"
#include "tokenizer/unicode.h"

namespace zephon::tokenizer {

absl::StatusOr<SpecialTokens> ParseSpecialTokens(std::string_view name) {
  if (name == "none") return SpecialTokens::kNone;
  if (name == "bos") return SpecialTokens::kBos;
  if (name == "eos") return SpecialTokens::kEos;
  if (name == "bos_eos") return SpecialTokens::kBosEos;
  if (name == "tokenizer_default") return SpecialTokens::kTokenizerDefault;
  return absl::InvalidArgumentError(
      absl::StrCat("special_tokens '", Av(name),
                   "' is not one of none, bos, eos, bos_eos, tokenizer_default"));
}

Tokenizer::Tokenizer(Common common)
    : bos_(common.bos),
      eos_(common.eos),
      default_prefix_(std::move(common.default_prefix)),
      default_suffix_(std::move(common.default_suffix)),
      fingerprint_(std::move(common.fingerprint)),
      window_(common.window),
      max_unsplit_bytes_(common.max_unsplit_bytes) {}

absl::Status Tokenizer::TooLong(std::string_view what) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      Av(what), " is longer than ", max_unsplit_bytes_,
      " bytes, the most this tokenizer encodes whole (TokenizerOptions.max_unsplit_bytes); "
      "raise that limit (encoding holds about 40 bytes per byte of it) or split the text"));
}

Tokenizer::~Tokenizer() = default;

absl::Status Tokenizer::CheckSpecialTokens(SpecialTokens mode) const {
  const bool need_bos = mode == SpecialTokens::kBos || mode == SpecialTokens::kBosEos;
  const bool need_eos = mode == SpecialTokens::kEos || mode == SpecialTokens::kBosEos;
  if (need_bos && !bos_.has_value()) {
    return absl::FailedPreconditionError(
        "special_tokens asks for a BOS token but the tokenizer names none; pass "
        "bos_token_id, or a model directory whose tokenizer_config.json has bos_token");
  }
  if (need_eos && !eos_.has_value()) {
    return absl::FailedPreconditionError(
        "special_tokens asks for an EOS token but the tokenizer names none; pass "
        "eos_token_id, or a model directory whose tokenizer_config.json has eos_token");
  }
  return absl::OkStatus();
}

absl::Status Tokenizer::Encode(std::string_view text, SpecialTokens mode,
                               std::vector<int32_t>* ids) const {
  if (IsValidUtf8(text)) return EncodeValidUtf8(text, mode, ids);
  return EncodeValidUtf8(ReplaceInvalidUtf8(text), mode, ids);
}

absl::Status Tokenizer::EncodeValidUtf8(std::string_view text, SpecialTokens mode,
                                        std::vector<int32_t>* ids) const {
  RETURN_IF_ERROR(CheckSpecialTokens(mode));
  if (mode == SpecialTokens::kBos || mode == SpecialTokens::kBosEos) ids->push_back(*bos_);
  if (mode == SpecialTokens::kTokenizerDefault) {
    ids->insert(ids->end(), default_prefix_.begin(), default_prefix_.end());
  }
  RETURN_IF_ERROR(EncodeText(text, ids));
  if (mode == SpecialTokens::kTokenizerDefault) {
    ids->insert(ids->end(), default_suffix_.begin(), default_suffix_.end());
  }
  if (mode == SpecialTokens::kEos || mode == SpecialTokens::kBosEos) ids->push_back(*eos_);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> Tokenizer::Encode(std::string_view text,
                                                       SpecialTokens mode) const {
  std::vector<int32_t> ids;
  RETURN_IF_ERROR(Encode(text, mode, &ids));
  return ids;
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::Load(const std::string& path,
                                                           const TokenizerOptions& options) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(
        "tokenizer '", path,
        "' does not exist; pass a tokenizer.json, a model directory holding one, or a "
        "SentencePiece .model"));
  }
  if (S_ISDIR(st.st_mode)) {
    const std::string json_path = absl::StrCat(path, "/tokenizer.json");
    const std::string config_path = absl::StrCat(path, "/tokenizer_config.json");
    struct stat jst;
    if (::stat(json_path.c_str(), &jst) != 0) {
      return absl::NotFoundError(absl::StrCat(
          "tokenizer directory '", path,
          "' has no tokenizer.json; pass the directory of an HF model snapshot (saved with "
          "a fast tokenizer) or the tokenizer file itself"));
    }
    ASSIGN_OR_RETURN(std::string json, ReadFile(json_path));
    std::string config;
    struct stat cst;
    if (::stat(config_path.c_str(), &cst) == 0) {
      ASSIGN_OR_RETURN(config, ReadFile(config_path));
    }
    return FromJson(json, options, config);
  }
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  if (absl::EndsWith(path, ".model")) return FromSentencePieceModel(bytes, options);
  return FromJson(bytes, options);
}

}  // namespace zephon::tokenizer
