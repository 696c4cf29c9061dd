// A std-only wrapper of sentencepiece::SentencePieceProcessor. libsentencepiece's header
// declares `namespace absl { using std::string_view; }`, which collides with Debian's
// Abseil (its own absl::string_view class), so only spm_processor.cc includes it and this
// interface names no absl type.
//
// Thread-safety: Encode and Decode are const and thread-safe (as SentencePiece's are).
#ifndef ZEPHON_TOKENIZER_INTERNAL_SPM_PROCESSOR_H_
#define ZEPHON_TOKENIZER_INTERNAL_SPM_PROCESSOR_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace zephon::tokenizer::internal {

class SpmProcessor {
 public:
  // nullptr and *error set when the bytes are not a SentencePiece model.
  static std::unique_ptr<SpmProcessor> Load(std::string_view model_bytes, std::string* error);
  ~SpmProcessor();

  bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const;
  bool Decode(const std::vector<int>& ids, std::string* text, std::string* error) const;
  int piece_size() const;
  int bos_id() const;  // -1 when the model has none
  int eos_id() const;

 private:
  explicit SpmProcessor(std::unique_ptr<sentencepiece::SentencePieceProcessor> sp);
  const std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace zephon::tokenizer::internal

#endif  // ZEPHON_TOKENIZER_INTERNAL_SPM_PROCESSOR_H_
