// HF tokenizers normalizers, on strings (no offset tracking: Zephon needs ids only):
// NFC, NFKC, Replace (string pattern), Prepend, and Sequence of them. The loader
// (hf_json) refuses every other type, so a Normalizer here is always exact.
//
// A huge text is normalized in chunks (Chunkable, SafeCutAt, ApplyChunk): the chunks'
// normalized forms, concatenated, are the text's.
//
// Thread-safety: immutable after construction; every method is const and thread-safe.
#ifndef ZEPHON_TOKENIZER_NORMALIZER_H_
#define ZEPHON_TOKENIZER_NORMALIZER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace zephon::tokenizer {

struct NormalizerStep {
  enum class Kind { kNfc, kNfkc, kReplace, kPrepend };
  Kind kind;
  std::string pattern;  // kReplace: the string replaced
  std::string content;  // kReplace: its replacement; kPrepend: the prefix
};

class Normalizer {
 public:
  // A Sequence is its steps flattened, in order.
  explicit Normalizer(std::vector<NormalizerStep> steps);

  // Replaces *text (valid UTF-8) with its normalized form. Errors: INTERNAL from ICU only.
  absl::Status Apply(std::string* text) const;

  // True when the normalizer can take a text in chunks cut where SafeCutAt allows: every
  // Replace pattern is one character (so none spans a cut) with a non-empty content (so a
  // first chunk never normalizes to nothing, which would lose Prepend), and no NFC/NFKC
  // step follows a Replace (whose content could combine across a cut).
  bool Chunkable() const { return chunkable_; }
  // Whether text may be cut before byte pos (0 < pos < size, a character boundary): the
  // character there has a normalization boundary before it for every NFC/NFKC step (and,
  // with two or more of them, is ASCII, which each leaves as it is).
  // REQUIRES: Chunkable().
  bool SafeCutAt(std::string_view text, size_t pos) const;
  // Appends the normalized form of a chunk to *out; `first` when it starts the text
  // (Prepend applies there only). REQUIRES: Chunkable(), a chunk cut where SafeCutAt says.
  absl::Status ApplyChunk(std::string_view chunk, bool first, std::string* out) const;

 private:
  std::vector<NormalizerStep> steps_;  // fixed at construction
  bool chunkable_ = true;
  int normal_forms_ = 0;  // NFC/NFKC steps
};

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_NORMALIZER_H_
