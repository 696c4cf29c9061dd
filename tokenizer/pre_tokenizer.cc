#include "tokenizer/pre_tokenizer.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tokenizer/unicode.h"

namespace zephon::tokenizer {
namespace {

using Kind = PreTokenizerStep::Kind;

bool NeedsPrefixSpace(const PreTokenizerStep& step, std::string_view text) {
  return step.add_prefix_space && (text.empty() || text[0] != ' ');
}

// Metaspace's replacement of the spaces of `text`, with the replacement prepended when the
// scheme asks for it (`at_start`: the text starts the piece the step was given, and
// `at_text_start`: that piece starts the encoded text).
void MetaspaceReplace(const PreTokenizerStep& step, std::string_view text, bool at_start,
                      bool at_text_start, std::string* out) {
  const std::string& rep = step.replacement;
  const size_t begin = out->size();
  absl::StrAppend(out, absl::StrReplaceAll(Av(text), {{" ", rep}}));
  if (!at_start) return;
  const bool starts = out->compare(begin, rep.size(), rep) == 0;
  if (!starts && (step.prepend_scheme == PreTokenizerStep::Prepend::kAlways ||
                  (step.prepend_scheme == PreTokenizerStep::Prepend::kFirst && at_text_start))) {
    out->insert(begin, rep);
  }
}

// Metaspace's split: each replacement character after byte 0 starts a new word. The end
// of the last word in `text` (from which the next chunk may continue it).
size_t MetaspaceWords(const std::string& rep, std::string_view text,
                      absl::FunctionRef<void(std::string_view)> emit) {
  size_t begin = 0;
  for (size_t k = rep.size() > 0 ? text.find(rep, 1) : std::string_view::npos;
       k != std::string_view::npos; k = text.find(rep, k + rep.size())) {
    emit(text.substr(begin, k - begin));
    begin = k;
  }
  return begin;
}

}  // namespace

bool PreTokenizer::OneWord() const {
  if (steps_.empty()) return true;
  const PreTokenizerStep& s = steps_[0];
  return (s.kind == Kind::kByteLevel && !s.use_regex) || (s.kind == Kind::kMetaspace && !s.split);
}

void PreTokenizer::Apply(Word piece, WordSink sink, size_t window) const {
  ApplyFrom(0, piece, sink, window);
}

void PreTokenizer::ApplyFrom(size_t step_index, Word w, WordSink sink, size_t window) const {
  if (step_index == steps_.size()) {
    if (!w.text.empty()) sink(w);
    return;
  }
  const PreTokenizerStep& step = steps_[step_index];
  // Only the first piece a step makes of w can start the text.
  bool first = true;
  auto next = [&](std::string_view p) {
    if (!p.empty()) ApplyFrom(step_index + 1, {p, w.at_text_start && first}, sink, window);
    first = false;
  };
  switch (step.kind) {
    case Kind::kSplit:
      ScanSplit(step.pattern, w.text, next, window);
      return;
    case Kind::kByteLevel: {
      std::string prefixed;
      std::string_view text = w.text;
      if (NeedsPrefixSpace(step, text)) {
        prefixed = absl::StrCat(" ", Av(text));
        text = prefixed;
      }
      if (step.use_regex) {
        ScanSplit(SplitPattern::kGpt2, text, next, window);
      } else {
        next(text);
      }
      return;
    }
    case Kind::kMetaspace: {
      std::string s;
      MetaspaceReplace(step, w.text, /*at_start=*/true, w.at_text_start, &s);
      if (!step.split) {
        next(s);
        return;
      }
      const size_t last = MetaspaceWords(step.replacement, s, next);
      next(std::string_view(s).substr(last));
      return;
    }
  }
}

PreTokenizerStream::PreTokenizerStream(const PreTokenizer& p, bool at_text_start,
                                       size_t window, size_t max_word, CutFinder cut,
                                       WordSink sink)
    : p_(p),
      window_(window == 0 ? kDefaultSplitWindow : window),
      max_word_(max_word),
      cut_(cut),
      sink_(sink),
      at_start_(at_text_start) {
  if (p.steps_.empty()) return;
  const PreTokenizerStep& s = p.steps_[0];
  if (s.kind == Kind::kSplit || (s.kind == Kind::kByteLevel && s.use_regex)) {
    // max_word is bytes, the scanner counts characters: a character is at least one byte.
    split_.emplace(s.kind == Kind::kSplit ? s.pattern : SplitPattern::kGpt2, window_,
                   max_word_);
  }
}

absl::Status PreTokenizerStream::TooLong() const {
  return absl::ResourceExhaustedError(absl::StrCat(
      "a word (or a one-word piece with no place to cut it) is longer than max_word, ",
      max_word_, " bytes"));
}

void PreTokenizerStream::Emit(std::string_view word) {
  if (word.empty()) return;
  const bool at_start = at_start_;
  at_start_ = false;
  p_.ApplyFrom(p_.steps_.empty() ? 0 : 1, {word, at_start}, sink_, window_);
}

absl::Status PreTokenizerStream::Feed(std::string_view chunk, bool last) {
  const bool first = !started_;
  started_ = true;
  if (p_.steps_.empty()) return FeedOneWord(chunk, last, first);
  if (split_.has_value()) {
    if (first && p_.steps_[0].kind == Kind::kByteLevel && NeedsPrefixSpace(p_.steps_[0], chunk)) {
      split_->Feed(" ", /*last=*/false, [&](std::string_view w) { Emit(w); });
    }
    return FeedSplit(chunk, last);
  }
  if (p_.steps_[0].kind == Kind::kMetaspace && p_.steps_[0].split) {
    return FeedMetaspace(chunk, last, first);
  }
  return FeedOneWord(chunk, last, first);
}

absl::Status PreTokenizerStream::FeedSplit(std::string_view chunk, bool last) {
  if (!split_->Feed(chunk, last, [&](std::string_view w) { Emit(w); })) return TooLong();
  return absl::OkStatus();
}

absl::Status PreTokenizerStream::FeedMetaspace(std::string_view chunk, bool last, bool first) {
  const PreTokenizerStep& step = p_.steps_[0];
  MetaspaceReplace(step, chunk, first, at_start_, &pending_);
  const size_t keep =
      MetaspaceWords(step.replacement, pending_, [&](std::string_view w) { Emit(w); });
  if (last) {
    Emit(std::string_view(pending_).substr(keep));
    pending_.clear();
    return absl::OkStatus();
  }
  pending_.erase(0, keep);
  if (max_word_ != 0 && pending_.size() > max_word_) return TooLong();
  return absl::OkStatus();
}

absl::Status PreTokenizerStream::FeedOneWord(std::string_view chunk, bool last, bool first) {
  // The first step's text is the chunk itself unless it changes it or a word is pending.
  const PreTokenizerStep* step = p_.steps_.empty() ? nullptr : &p_.steps_[0];
  const bool metaspace = step != nullptr && step->kind == Kind::kMetaspace;
  const bool prefix = step != nullptr && step->kind == Kind::kByteLevel && first &&
                      NeedsPrefixSpace(*step, chunk);
  std::string_view text = chunk;
  if (metaspace || prefix || !pending_.empty()) {
    if (metaspace) {
      MetaspaceReplace(*step, chunk, first, at_start_, &pending_);
    } else {
      if (prefix) pending_.push_back(' ');
      pending_.append(chunk);
    }
    text = pending_;
  }
  // Later steps may join across a cut: with them the word is held whole.
  const bool may_cut = p_.steps_.size() <= 1;
  size_t done = 0;
  while (may_cut && text.size() - done > window_) {
    // The largest cut within a window of the rest, or within a growing one when the
    // window holds none.
    size_t span = window_, cut = 0;
    while (cut == 0 && done + span < text.size()) {
      cut = cut_(text.substr(done, span));
      if (cut == 0) {
        if (max_word_ != 0 && span > max_word_) return TooLong();
        span *= 2;
      }
    }
    if (cut == 0) break;  // no cut before the end: keep the rest
    Emit(text.substr(done, cut));
    done += cut;
  }
  if (last) {
    if (max_word_ != 0 && text.size() - done > max_word_) return TooLong();
    Emit(text.substr(done));
    pending_.clear();
    return absl::OkStatus();
  }
  if (text.data() == pending_.data()) {
    pending_.erase(0, done);
  } else {
    pending_.assign(text.substr(done));
  }
  if (max_word_ != 0 && pending_.size() > max_word_) return TooLong();
  return absl::OkStatus();
}

}  // namespace zephon::tokenizer
