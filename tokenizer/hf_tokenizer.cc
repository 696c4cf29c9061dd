#include "tokenizer/hf_tokenizer.h"

#include <deque>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zephon::tokenizer {

absl::Status HfTokenizer::EncodeText(std::string_view text, std::vector<int32_t>* ids) const {
  std::vector<Segment> segments;
  if (p_.raw_added != nullptr) {
    p_.raw_added->Split(text, &segments);
  } else if (!text.empty()) {
    segments.push_back({text});
  }
  std::string normalized;
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      ids->push_back(seg.id);
      continue;
    }
    const bool at_start = seg.text.data() == text.data();
    if (!p_.normalizer.has_value()) {
      RETURN_IF_ERROR(EncodeNormalized(seg.text, at_start, ids));
      continue;
    }
    normalized.assign(seg.text);
    RETURN_IF_ERROR(p_.normalizer->Apply(&normalized));
    RETURN_IF_ERROR(EncodeNormalized(normalized, at_start, ids));
  }
  return absl::OkStatus();
}

absl::Status HfTokenizer::EncodeNormalized(std::string_view piece, bool at_text_start,
                                           std::vector<int32_t>* ids) const {
  thread_local std::vector<Segment> segments;
  thread_local std::vector<Word> words;
  thread_local std::deque<std::string> arena;
  segments.clear();
  if (p_.normalized_added != nullptr) {
    p_.normalized_added->Split(piece, &segments);
  } else if (!piece.empty()) {
    segments.push_back({piece});
  }
  for (const Segment& seg : segments) {
    if (seg.id >= 0) {
      ids->push_back(seg.id);
      continue;
    }
    words.clear();
    arena.clear();
    p_.pre_tokenizer.Apply({seg.text, at_text_start && seg.text.data() == piece.data()},
                           &arena, &words);
    for (const Word& w : words) p_.bpe->Encode(w.text, ids);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> HfTokenizer::Decode(absl::Span<const int32_t> ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    auto it = p_.decode_tokens.find(id);
    if (it == p_.decode_tokens.end()) {
      return absl::OutOfRangeError(absl::StrCat("token id ", id,
                                                " is not in the tokenizer's vocabulary (size ",
                                                p_.vocab_size, ")"));
    }
    tokens.push_back(it->second);
  }
  return p_.decoder.Decode(std::move(tokens));
}

}  // namespace zephon::tokenizer
