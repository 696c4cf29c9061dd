// Hand-written scanners for the Split regexes that real tokenizer.json files use (GPT-2,
// Llama 3 / cl100k, Qwen 2/3, GPT-4o / o200k). Each scanner returns exactly the matches
// Oniguruma (HF tokenizers' regex engine) finds with find_iter, without a regex engine:
// the patterns are recognized by their exact string and anything else is refused.
//
// Memory: text is decoded into code points (9 bytes a character) one window at a time; a
// match whose end is too close to the window's end to be final (the scanner looks at most
// kSplitLookahead characters past a match) is scanned again in the next window, which
// starts at it. A window grows only to hold one match longer than itself.
//
// Thread-safety: the functions are thread-safe; a SplitStream is used by one thread.
#ifndef ZEPHON_TOKENIZER_SPLIT_SCANNER_H_
#define ZEPHON_TOKENIZER_SPLIT_SCANNER_H_

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"

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

// Receives each match; the view is valid during the call only.
using PieceSink = absl::FunctionRef<void(std::string_view)>;

// Characters a window holds by default (about 600 KB decoded).
inline constexpr size_t kDefaultSplitWindow = size_t{1} << 16;
// How far past a match's end the scanner may look (a contraction's two letters after the
// apostrophe; (?!\S) after a whitespace run).
inline constexpr size_t kSplitLookahead = 3;

// Calls sink with the consecutive matches of `pattern` in `text`, which cover it entirely
// (every known pattern matches at every position), exactly as one scan of the whole text
// finds them. `window` (characters, >= 1; 0 = kDefaultSplitWindow) changes memory only.
// REQUIRES: text is valid UTF-8.
void ScanSplit(SplitPattern pattern, std::string_view text, PieceSink sink, size_t window = 0);

// The same, appending views into `text` to *pieces.
void ScanSplit(SplitPattern pattern, std::string_view text,
               std::vector<std::string_view>* pieces);

// ScanSplit over a text that arrives in consecutive chunks (e.g. normalized a part at a
// time): the matches are those of the whole text. What a chunk's end leaves undecided (its
// last match or two) is copied and scanned again with the next chunk.
class SplitStream {
 public:
  // `max_match`: the longest match (characters) the stream holds; 0 = no limit.
  SplitStream(SplitPattern pattern, size_t window, size_t max_match)
      : pattern_(pattern), window_(window), max_match_(max_match) {}

  // Scans the next chunk (valid UTF-8, whole characters); `last` when no more follows.
  // False (and the stream is done) when a match is longer than max_match characters.
  bool Feed(std::string_view chunk, bool last, PieceSink sink);

 private:
  const SplitPattern pattern_;
  const size_t window_, max_match_;
  std::string carry_;  // the undecided end of the text fed so far
};

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_SPLIT_SCANNER_H_
