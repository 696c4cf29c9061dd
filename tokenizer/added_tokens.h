// Added tokens (tokenizer.json "added_tokens"): strings matched in the text before the
// model sees it, each becoming one id. Matching follows HF tokenizers' AddedVocabulary:
// leftmost-longest, non-overlapping; single_word tokens only between non-word characters;
// lstrip/rstrip absorb the whitespace around the match. Tokens with normalized=false are
// matched in the raw text, the others in each normalized piece (two AddedTokens objects).
// With split_special_tokens, matches of special tokens are skipped (they stay plain text),
// as HF's encode_special_tokens does.
//
// Thread-safety: immutable after construction; Split is const and thread-safe.
#ifndef ZEPHON_TOKENIZER_ADDED_TOKENS_H_
#define ZEPHON_TOKENIZER_ADDED_TOKENS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/function_ref.h"

namespace zephon::tokenizer {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
};

// One piece of a split: text (id == -1) or an added token's match (its id).
struct Segment {
  std::string_view text;
  int32_t id = -1;
};

class AddedTokens {
 public:
  // Tokens with empty content are ignored (they can never match).
  AddedTokens(std::vector<AddedToken> tokens, bool split_special_tokens);

  bool empty() const { return tokens_.empty(); }

  // Calls sink with the segments of `text` in order, as they are found; they cover it.
  // Empty text yields nothing. The views point into `text` (nothing is copied).
  void Split(std::string_view text, absl::FunctionRef<void(Segment)> sink) const;
  // The same, appended to *out.
  void Split(std::string_view text, std::vector<Segment>* out) const;

 private:
  // A byte trie; node 0 is the root. token >= 0 marks the end of tokens_[token].
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> next;  // sorted by byte
    int32_t token = -1;
  };
  int32_t Child(int32_t node, unsigned char c) const;
  // The longest token starting at text[i] (index into tokens_), or -1; *len its length.
  int32_t LongestAt(std::string_view text, size_t i, size_t* len) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> trie_;
  bool first_byte_[256] = {};
  bool split_special_tokens_;
};

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_ADDED_TOKENS_H_
