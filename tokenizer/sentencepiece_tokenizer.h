// A SentencePiece .model through libsentencepiece (Debian libsentencepiece-dev): the
// reference implementation itself, so ids equal spm_encode's. Created by
// Tokenizer::FromSentencePieceModel. BOS/EOS are the model's bos_id/eos_id;
// kTokenizerDefault adds nothing (spm_encode's default).
//
// Thread-safety: thread-safe (SentencePieceProcessor's Encode/Decode are const).
#ifndef ZEPHON_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
#define ZEPHON_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_

#include <memory>

#include "tokenizer/internal/spm_processor.h"
#include "tokenizer/tokenizer.h"

namespace zephon::tokenizer {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  SentencePieceTokenizer(Common common,
                         std::unique_ptr<internal::SpmProcessor> processor);
  ~SentencePieceTokenizer() override;

  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  int32_t vocab_size() const override;

 protected:
  absl::Status EncodeText(std::string_view text, std::vector<int32_t>* ids) const override;

 private:
  const std::unique_ptr<internal::SpmProcessor> sp_;
};

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_SENTENCEPIECE_TOKENIZER_H_
