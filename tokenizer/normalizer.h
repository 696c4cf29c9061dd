// HF tokenizers normalizers, on strings (no offset tracking: Zephon needs ids only):
// NFC, NFKC, Replace (string pattern), Prepend, and Sequence of them. The loader
// (hf_json) refuses every other type, so a Normalizer here is always exact.
//
// Thread-safety: immutable after construction; Apply is const and thread-safe.
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
  explicit Normalizer(std::vector<NormalizerStep> steps) : steps_(std::move(steps)) {}

  // Replaces *text (valid UTF-8) with its normalized form. Errors: INTERNAL from ICU only.
  absl::Status Apply(std::string* text) const;

 private:
  std::vector<NormalizerStep> steps_;  // fixed at construction
};

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_NORMALIZER_H_
