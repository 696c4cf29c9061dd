#include "tokenizer/pre_tokenizer.h"

#include "absl/strings/str_replace.h"
#include "tokenizer/unicode.h"

namespace zephon::tokenizer {
namespace {

void ApplyStep(const PreTokenizerStep& step, Word w, std::deque<std::string>* arena,
               std::vector<Word>* out) {
  // Reused per thread: this runs once per piece of every document.
  thread_local std::vector<std::string_view> pieces;
  pieces.clear();
  switch (step.kind) {
    case PreTokenizerStep::Kind::kSplit:
      ScanSplit(step.pattern, w.text, &pieces);
      break;
    case PreTokenizerStep::Kind::kByteLevel: {
      std::string_view text = w.text;
      if (step.add_prefix_space && (text.empty() || text[0] != ' ')) {
        arena->push_back(" ");
        arena->back().append(text);
        text = arena->back();
      }
      if (step.use_regex) {
        ScanSplit(SplitPattern::kGpt2, text, &pieces);
      } else {
        pieces.push_back(text);
      }
      break;
    }
    case PreTokenizerStep::Kind::kMetaspace: {
      const std::string& rep = step.replacement;
      std::string s = absl::StrReplaceAll(Av(w.text), {{" ", rep}});
      const bool starts = s.compare(0, rep.size(), rep) == 0;
      if (!starts && (step.prepend_scheme == PreTokenizerStep::Prepend::kAlways ||
                      (step.prepend_scheme == PreTokenizerStep::Prepend::kFirst &&
                       w.at_text_start))) {
        s.insert(0, rep);
      }
      arena->push_back(std::move(s));
      std::string_view text = arena->back();
      if (!step.split) {
        pieces.push_back(text);
        break;
      }
      // MergedWithNext: each replacement character starts a new word.
      size_t begin = 0;
      for (size_t k = rep.size() > 0 ? text.find(rep, 1) : std::string_view::npos;
           k != std::string_view::npos; k = text.find(rep, k + rep.size())) {
        pieces.push_back(text.substr(begin, k - begin));
        begin = k;
      }
      pieces.push_back(text.substr(begin));
      break;
    }
  }
  bool first = true;
  for (std::string_view p : pieces) {
    if (!p.empty()) out->push_back({p, w.at_text_start && first});
    first = false;
  }
}

}  // namespace

void PreTokenizer::Apply(Word piece, std::deque<std::string>* arena,
                         std::vector<Word>* words) const {
  if (steps_.empty()) {
    if (!piece.text.empty()) words->push_back(piece);
    return;
  }
  if (steps_.size() == 1) {
    ApplyStep(steps_[0], piece, arena, words);
    return;
  }
  std::vector<Word> current{piece}, next;
  for (size_t s = 0; s < steps_.size(); ++s) {
    std::vector<Word>* target = s + 1 == steps_.size() ? words : &next;
    next.clear();
    for (const Word& w : current) ApplyStep(steps_[s], w, arena, target);
    if (target == &next) current.swap(next);
  }
}

}  // namespace zephon::tokenizer
