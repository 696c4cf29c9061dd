// HF tokenizers pre-tokenizers: split a normalized piece into the words the model
// encodes. Supported: Split (the known regexes, Isolated, not inverted), ByteLevel
// (add_prefix_space, use_regex with GPT-2's pattern), Metaspace, and Sequence of them.
// ByteLevel's byte-to-character mapping is not applied here: the loader maps the
// vocabulary back to raw bytes instead (the same ids, without re-encoding every text), so
// ByteLevel must be the last step.
//
// Words are streamed to a sink as they are found, never collected: memory is the split
// scanner's window (split_scanner.h), not the piece. PreTokenizerStream takes a piece in
// chunks (a huge document normalized a part at a time).
//
// Thread-safety: PreTokenizer is immutable after construction; Apply is const and
// thread-safe. A PreTokenizerStream is used by one thread.
#ifndef ZEPHON_TOKENIZER_PRE_TOKENIZER_H_
#define ZEPHON_TOKENIZER_PRE_TOKENIZER_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
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

// Receives each word; the view is valid during the call only.
using WordSink = absl::FunctionRef<void(Word)>;

class PreTokenizer {
 public:
  explicit PreTokenizer(std::vector<PreTokenizerStep> steps) : steps_(std::move(steps)) {}

  // Calls sink with the words of `piece`, in order. `window`: the split scanner's window
  // (characters; 0 = its default); it changes memory, never the words.
  void Apply(Word piece, WordSink sink, size_t window = 0) const;

  // True when the first step keeps the whole piece one word (no steps, ByteLevel without
  // its regex, Metaspace without split): the model then encodes the piece whole.
  bool OneWord() const;

  const std::vector<PreTokenizerStep>& steps() const { return steps_; }

 private:
  friend class PreTokenizerStream;
  // Applies steps_[step..] to w.
  void ApplyFrom(size_t step, Word w, WordSink sink, size_t window) const;

  std::vector<PreTokenizerStep> steps_;  // fixed at construction
};

// The words of a piece that arrives in consecutive chunks: the same words, in the same
// order, as PreTokenizer::Apply of the whole piece. The undecided end of each chunk (its
// last word, a few characters of lookahead) is kept for the next one.
class PreTokenizerStream {
 public:
  // Where a one-word piece may be cut into words the model encodes independently with the
  // same ids (see Bpe::LastSafeCut): the largest such offset in `text`, or 0.
  using CutFinder = absl::FunctionRef<size_t(std::string_view text)>;

  // `at_text_start`: the piece starts the encoded text. `max_word`: the longest word (bytes)
  // the stream holds; 0 = no limit. `cut` is used only when p.OneWord().
  PreTokenizerStream(const PreTokenizer& p, bool at_text_start, size_t window, size_t max_word,
                     CutFinder cut, WordSink sink);

  // The next chunk (valid UTF-8, whole characters); `last` when no more follows.
  // Errors: RESOURCE_EXHAUSTED when a word would be longer than max_word bytes (the stream
  // is then done).
  absl::Status Feed(std::string_view chunk, bool last);

 private:
  // The first step, on a chunk, given the piece so far.
  absl::Status FeedSplit(std::string_view chunk, bool last);
  absl::Status FeedMetaspace(std::string_view chunk, bool last, bool first);
  absl::Status FeedOneWord(std::string_view chunk, bool last, bool first);
  void Emit(std::string_view word);  // steps_[1..] on a word of the first step
  absl::Status TooLong() const;

  const PreTokenizer& p_;
  const size_t window_, max_word_;
  const CutFinder cut_;
  const WordSink sink_;
  bool started_ = false;   // a chunk was fed
  bool at_start_;          // the next word starts the encoded text
  std::optional<SplitStream> split_;
  std::string pending_;  // Metaspace / one word: the current word, not yet emitted
};

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_PRE_TOKENIZER_H_
