#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode.h"

namespace zephon::tokenizer {
namespace {

// The class of the character ending at text[end-1] / starting at text[begin].
uint8_t ClassBefore(std::string_view text, size_t end) {
  size_t i = end - 1;
  while (i > 0 && (static_cast<unsigned char>(text[i]) & 0xC0) == 0x80) --i;
  int len;
  return ClassOf(DecodeUtf8(text, i, &len));
}
uint8_t ClassAt(std::string_view text, size_t begin) {
  int len;
  return ClassOf(DecodeUtf8(text, begin, &len));
}

}  // namespace

AddedTokens::AddedTokens(std::vector<AddedToken> tokens, bool split_special_tokens)
    : split_special_tokens_(split_special_tokens) {
  trie_.emplace_back();
  for (auto& t : tokens) {
    if (t.content.empty()) continue;
    int32_t node = 0;
    for (unsigned char c : t.content) {
      int32_t child = Child(node, c);
      if (child < 0) {
        child = static_cast<int32_t>(trie_.size());
        trie_.emplace_back();
        auto& next = trie_[node].next;
        next.insert(std::upper_bound(next.begin(), next.end(), std::make_pair(c, -1)),
                    std::make_pair(c, child));
      }
      node = child;
    }
    // A duplicate content keeps the first token, as HF's map from content does.
    if (trie_[node].token < 0) {
      trie_[node].token = static_cast<int32_t>(tokens_.size());
      first_byte_[static_cast<unsigned char>(t.content[0])] = true;
      tokens_.push_back(std::move(t));
    }
  }
}

int32_t AddedTokens::Child(int32_t node, unsigned char c) const {
  for (const auto& [byte, child] : trie_[node].next) {
    if (byte == c) return child;
    if (byte > c) break;
  }
  return -1;
}

int32_t AddedTokens::LongestAt(std::string_view text, size_t i, size_t* len) const {
  int32_t node = 0, best = -1;
  for (size_t k = i; k < text.size(); ++k) {
    node = Child(node, static_cast<unsigned char>(text[k]));
    if (node < 0) break;
    if (trie_[node].token >= 0) {
      best = trie_[node].token;
      *len = k + 1 - i;
    }
  }
  return best;
}

void AddedTokens::Split(std::string_view text, std::vector<Segment>* out) const {
  Split(text, [&](Segment s) { out->push_back(s); });
}

void AddedTokens::Split(std::string_view text, absl::FunctionRef<void(Segment)> sink) const {
  if (text.empty()) return;
  size_t start_offset = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    size_t len = 0;
    const int32_t t = LongestAt(text, i, &len);
    if (t < 0) {
      ++i;
      continue;
    }
    const AddedToken& tok = tokens_[t];
    size_t start = i, stop = i + len;
    i = stop;  // matches never overlap, even skipped ones (HF's leftmost_find_iter)
    if (split_special_tokens_ && tok.special) continue;
    if (tok.single_word) {
      const bool start_space = start == 0 || (ClassBefore(text, start) & kWordish) == 0;
      const bool stop_space = stop == text.size() || (ClassAt(text, stop) & kWordish) == 0;
      if (!start_space || !stop_space) continue;
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t p = s - 1;
        while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
        int l;
        if ((ClassOf(DecodeUtf8(text, p, &l)) & kSpace) == 0) break;
        s = p;
      }
      start = std::max(s, start_offset);
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        int l;
        if ((ClassOf(DecodeUtf8(text, stop, &l)) & kSpace) == 0) break;
        stop += l;
      }
    }
    if (start_offset < start) sink({text.substr(start_offset, start - start_offset)});
    sink({text.substr(start, stop - start), tok.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) sink({text.substr(start_offset)});
}

}  // namespace zephon::tokenizer
