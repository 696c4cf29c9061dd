#include "tokenizer/sentencepiece_tokenizer.h"

#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "tokenizer/unicode.h"

namespace zephon::tokenizer {

SentencePieceTokenizer::SentencePieceTokenizer(
    Common common, std::unique_ptr<internal::SpmProcessor> processor)
    : Tokenizer(std::move(common)), sp_(std::move(processor)) {}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;

absl::Status SentencePieceTokenizer::EncodeText(std::string_view text,
                                                std::vector<int32_t>* ids) const {
  // libsentencepiece normalizes and encodes a text whole, holding several copies of it.
  if (max_unsplit_bytes() != 0 && text.size() > max_unsplit_bytes()) {
    return TooLong("the text (SentencePiece encodes a text whole)");
  }
  std::vector<int> out;
  std::string error;
  if (!sp_->Encode(text, &out, &error)) {
    return absl::InternalError(absl::StrCat("sentencepiece encode failed: ", error));
  }
  ids->insert(ids->end(), out.begin(), out.end());
  return absl::OkStatus();
}

absl::StatusOr<std::string> SentencePieceTokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::vector<int> in(ids.begin(), ids.end());
  for (int id : in) {
    if (id < 0 || id >= sp_->piece_size()) {
      return absl::OutOfRangeError(absl::StrCat("token id ", id,
                                                " is not in the SentencePiece vocabulary (size ",
                                                sp_->piece_size(), ")"));
    }
  }
  std::string text, error;
  if (!sp_->Decode(in, &text, &error)) {
    return absl::InternalError(absl::StrCat("sentencepiece decode failed: ", error));
  }
  return text;
}

int32_t SentencePieceTokenizer::vocab_size() const { return sp_->piece_size(); }

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromSentencePieceModel(
    std::string_view model_bytes, const TokenizerOptions& options) {
  std::string error;
  if (!internal::SpmProcessor::ShimAvailable(&error)) {
    return absl::FailedPreconditionError(
        absl::StrCat("SentencePiece models are unavailable: ", error));
  }
  std::unique_ptr<internal::SpmProcessor> sp = internal::SpmProcessor::Load(model_bytes, &error);
  if (sp == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SentencePiece model: cannot load it (", error,
        "); pass the .model file spm_train or the model's repository wrote"));
  }
  Common common;
  if (sp->bos_id() >= 0) common.bos = sp->bos_id();
  if (sp->eos_id() >= 0) common.eos = sp->eos_id();
  if (options.bos_token_id.has_value()) common.bos = options.bos_token_id;
  if (options.eos_token_id.has_value()) common.eos = options.eos_token_id;
  common.max_unsplit_bytes = options.max_unsplit_bytes;
  // split_special_tokens does not apply: SentencePiece never matches control symbols in text.
  common.fingerprint = absl::StrCat(
      "sha256:", Sha256Hex(absl::StrCat(Av(model_bytes), "\nsentencepiece;bos=",
                                        common.bos.value_or(-1), ";eos=",
                                        common.eos.value_or(-1))));
  return std::unique_ptr<Tokenizer>(new SentencePieceTokenizer(std::move(common), std::move(sp)));
}

}  // namespace zephon::tokenizer
