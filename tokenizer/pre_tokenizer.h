// HF tokenizers pre-tokenizers: split a normalized piece into the words the model
// encodes. Supported: Split (the known regexes, Isolated, not inverted), ByteLevel
// (add_prefix_space, use_regex with GPT-2's pattern), Metaspace, and Sequence of them.
// ByteLevel's byte-to-character mapping is not applied here: the loader maps the
// vocabulary back to raw bytes instead (the same ids, without re-encoding every text), so
// ByteLevel must be the last step.
//
// Thread-safety: immutable after construction; Apply is const and thread-safe.
#ifndef ZEPHON_TOKENIZER_PRE_TOKENIZER_H_
#define ZEPHON_TOKENIZER_PRE_TOKENIZER_H_

#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/split_scanner.h"

namespace zephon::tokenizer {

struct PreTokenizerStep {
  enum class Kind { kSplit, kByteLevel, kMetaspace };
  enum class Prepend { kAlways, kFirst, kNever };
  Kind kind;
  SplitPattern pattern = SplitPattern::kGpt2;  // kSplit
  bool add_prefix_space = false;               // kByteLevel
  bool use_regex = false;                      // kByteLevel
  std::string replacement;                     // kMetaspace (one character)
  Prepend prepend_scheme = Prepend::kAlways;   // kMetaspace
  bool split = true;                           // kMetaspace
};

// A word and whether it starts at byte 0 of the encoded text (Metaspace's "first").
struct Word {
  std::string_view text;
  bool at_text_start = false;
};

class PreTokenizer {
 public:
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {}

  // Appends the words of `piece` to *words. Strings the steps create live in *arena
  // (stable addresses); the other views point into `piece`.
  void Apply(Word piece, std::deque<std::string>* arena, std::vector<Word>* words) const;

 private:
  std::vector<PreTokenizerStep> steps_;  // fixed at construction
};

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_PRE_TOKENIZER_H_
