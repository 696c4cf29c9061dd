#include "tokenizer/hf_tokenizer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zephon::tokenizer {
namespace {

bool IsCharStart(char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }

}  // namespace

absl::Status HfTokenizer::EncodeText(std::string_view text, std::vector<int32_t>* ids) const {
  absl::Status status;
  auto segment = [&](Segment seg) {
    if (!status.ok()) return;
    if (seg.id >= 0) {
      ids->push_back(seg.id);
      return;
    }
    status = EncodeSegment(seg.text, seg.text.data() == text.data(), ids);
  };
  if (p_.raw_added != nullptr) {
    p_.raw_added->Split(text, segment);
  } else if (!text.empty()) {
    segment({text});
  }
  return status;
}

absl::Status HfTokenizer::EncodeSegment(std::string_view raw, bool at_text_start,
                                        std::vector<int32_t>* ids) const {
  if (!p_.normalizer.has_value()) return EncodeNormalized(raw, at_text_start, ids);
  const size_t chunk = window() != 0 ? window() : kDefaultSplitWindow;
  if (raw.size() > chunk && p_.normalizer->Chunkable() && p_.normalized_added == nullptr) {
    return EncodeChunked(raw, at_text_start, ids);
  }
  if (max_unsplit_bytes() != 0 && raw.size() > max_unsplit_bytes()) {
    return TooLong("a piece of the text between added tokens, which this normalizer (or "
                   "its added tokens matched in normalized text) takes whole,");
  }
  std::string normalized(raw);
  RETURN_IF_ERROR(p_.normalizer->Apply(&normalized));
  return EncodeNormalized(normalized, at_text_start, ids);
}

absl::Status HfTokenizer::EncodeChunked(std::string_view raw, bool at_text_start,
                                        std::vector<int32_t>* ids) const {
  const size_t chunk = window() != 0 ? window() : kDefaultSplitWindow;
  return WithStream(at_text_start, ids, [&](PreTokenizerStream& stream) -> absl::Status {
    std::string normalized;
    size_t begin = 0;
    while (begin < raw.size()) {
      size_t end = std::min(raw.size(), begin + chunk);
      while (end < raw.size() &&
             !(IsCharStart(raw[end]) && p_.normalizer->SafeCutAt(raw, end))) {
        ++end;
      }
      if (max_unsplit_bytes() != 0 && end - begin > max_unsplit_bytes()) {
        return TooLong("a stretch of the text with no place to cut its normalization");
      }
      normalized.clear();
      RETURN_IF_ERROR(
          p_.normalizer->ApplyChunk(raw.substr(begin, end - begin), begin == 0, &normalized));
      RETURN_IF_ERROR(StreamError(stream.Feed(normalized, end == raw.size())));
      begin = end;
    }
    return absl::OkStatus();
  });
}

absl::Status HfTokenizer::EncodeNormalized(std::string_view piece, bool at_text_start,
                                           std::vector<int32_t>* ids) const {
  if (p_.normalized_added == nullptr) {
    if (piece.empty()) return absl::OkStatus();
    return WithStream(at_text_start, ids, [&](PreTokenizerStream& stream) {
      return StreamError(stream.Feed(piece, /*last=*/true));
    });
  }
  absl::Status status;
  p_.normalized_added->Split(piece, [&](Segment seg) {
    if (!status.ok()) return;
    if (seg.id >= 0) {
      ids->push_back(seg.id);
      return;
    }
    status = WithStream(at_text_start && seg.text.data() == piece.data(), ids,
                        [&](PreTokenizerStream& stream) {
                          return StreamError(stream.Feed(seg.text, /*last=*/true));
                        });
  });
  return status;
}

absl::Status HfTokenizer::WithStream(
    bool at_text_start, std::vector<int32_t>* ids,
    absl::FunctionRef<absl::Status(PreTokenizerStream&)> feed) const {
  // The stream refers to these two for its lifetime.
  auto cut = [this](std::string_view word) { return p_.bpe->LastSafeCut(word); };
  auto encode = [this, ids](Word w) { p_.bpe->Encode(w.text, ids); };
  PreTokenizerStream stream(p_.pre_tokenizer, at_text_start, window(), max_unsplit_bytes(),
                            cut, encode);
  return feed(stream);
}

absl::Status HfTokenizer::StreamError(absl::Status s) const {
  if (absl::IsResourceExhausted(s)) {
    return TooLong("a pre-tokenized word of the text (or, for a tokenizer that does not "
                   "pre-tokenize, a stretch with no place to cut it)");
  }
  return s;
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
