// Hand-written scanners for the Split regexes that real tokenizer.json files use (GPT-2,
// Llama 3 / cl100k, Qwen 2/3, GPT-4o / o200k). Each scanner returns exactly the matches
// Oniguruma (HF tokenizers' regex engine) finds with find_iter, without a regex engine:
// the patterns are recognized by their exact string and anything else is refused.
//
// Thread-safety: stateless; every function is thread-safe.
#ifndef ZEPHON_TOKENIZER_SPLIT_SCANNER_H_
#define ZEPHON_TOKENIZER_SPLIT_SCANNER_H_

#include <optional>
#include <string_view>
#include <vector>

namespace zephon::tokenizer {

enum class SplitPattern {
  kGpt2,    // 's|'t|...| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kCl100k,  // Llama 3 / cl100k: case-insensitive contractions, \p{N}{1,3}
  kQwen2,   // Qwen 2/3: cl100k with single digits (\p{N})
  kO200k,   // GPT-4o / o200k: cased letter runs, contractions as suffixes
};

// The pattern whose regex source is exactly `regex`, or nullopt.
std::optional<SplitPattern> RecognizeSplitPattern(std::string_view regex);

// The regex source of a pattern (as tokenizer.json spells it).
std::string_view SplitPatternSource(SplitPattern pattern);

// Appends to *pieces the consecutive matches of `pattern` in `text`, which cover it
// entirely (every known pattern matches at every position). REQUIRES: text is valid UTF-8.
// The views point into `text`.
void ScanSplit(SplitPattern pattern, std::string_view text,
               std::vector<std::string_view>* pieces);

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_SPLIT_SCANNER_H_
