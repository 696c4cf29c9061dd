#include "tokenizer/split_scanner.h"

#include <algorithm>
#include <cstdint>

#include "tokenizer/unicode.h"

namespace zephon::tokenizer {
namespace {

constexpr std::string_view kGpt2Source =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr std::string_view kCl100kSource =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Source =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kO200kSource =
    R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The text decoded once into code points and their classes, so the scanner below reads
// like the regex: positions are character indices, n is one past the last.
struct Chars {
  std::vector<char32_t> cp;
  std::vector<uint8_t> cls;
  std::vector<size_t> byte;  // byte offset of each character, plus the end
  size_t n = 0;
};

// Characters whose decode buffers a thread keeps between calls (about 9 MB).
constexpr size_t kKeepChars = size_t{1} << 20;

// Decodes at most `max_chars` characters of text from byte `begin`; byte offsets are
// text's.
void Decode(std::string_view text, size_t begin, size_t max_chars, Chars* c) {
  c->cp.clear();
  c->cls.clear();
  c->byte.clear();
  size_t i = begin;
  while (i < text.size() && c->cp.size() < max_chars) {
    int len;
    const char32_t cp = DecodeUtf8(text, i, &len);
    c->cp.push_back(cp);
    c->cls.push_back(ClassOf(cp));
    c->byte.push_back(i);
    i += len;
  }
  c->byte.push_back(i);
  c->n = c->cp.size();
}

class Scanner {
 public:
  Scanner(SplitPattern p, const Chars& c) : p_(p), cp_(c.cp), cls_(c.cls), n_(c.n) {}

  // End (character index) of the match starting at i. REQUIRES: i < n.
  size_t MatchAt(size_t i) const {
    reach_ = 0;
    size_t e;
    switch (p_) {
      case SplitPattern::kGpt2:
        if ((e = Contraction(i, /*ignore_case=*/false)) != 0) return e;
        if ((e = SpaceThen(i, kLetter)) != 0) return e;
        if ((e = SpaceThen(i, kNumber)) != 0) return e;
        if ((e = SpacePunct(i, /*trail_slash=*/false, /*trail_newlines=*/false)) != 0) return e;
        return Whitespace(i, /*newline_alt=*/false);
      case SplitPattern::kCl100k:
      case SplitPattern::kQwen2:
        if ((e = Contraction(i, /*ignore_case=*/true)) != 0) return e;
        if ((e = PrefixedLetters(i)) != 0) return e;
        if ((e = Digits(i, p_ == SplitPattern::kCl100k ? 3 : 1)) != 0) return e;
        if ((e = SpacePunct(i, false, true)) != 0) return e;
        return Whitespace(i, /*newline_alt=*/true);
      case SplitPattern::kO200k:
        if ((e = O200kWord(i, /*lower_first=*/true)) != 0) return e;
        if ((e = O200kWord(i, /*lower_first=*/false)) != 0) return e;
        if ((e = Digits(i, 3)) != 0) return e;
        if ((e = SpacePunct(i, true, true)) != 0) return e;
        return Whitespace(i, /*newline_alt=*/true);
    }
    return i + 1;
  }

  // After MatchAt: the furthest character index looked at by the two alternatives that
  // look further than kSplitLookahead past their match (0 when neither ran): a whitespace
  // run's end (cl100k's match ends at the run's last newline) and o200k's uppercase run
  // (its match may back off from the run's end).
  size_t reach() const { return reach_; }

 private:
  bool Is(size_t k, uint8_t bits) const { return k < n_ && (cls_[k] & bits) != 0; }
  bool IsNewline(size_t k) const { return k < n_ && (cp_[k] == '\r' || cp_[k] == '\n'); }
  // Oniguruma's (?i:) folds case by Unicode: besides ASCII, LATIN SMALL LETTER LONG S
  // (U+017F) folds to 's' (checked against HF tokenizers); no other character folds to a
  // letter of the contractions.
  static char32_t Lower(char32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    return c == 0x17F ? 's' : c;
  }

  // '(s|t|re|ve|m|ll|d): end, or 0.
  size_t Contraction(size_t i, bool ignore_case) const {
    if (i >= n_ || cp_[i] != '\'' || i + 1 >= n_) return 0;
    auto at = [&](size_t k) { return ignore_case ? Lower(cp_[k]) : cp_[k]; };
    const char32_t a = at(i + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
    if (i + 2 >= n_) return 0;
    const char32_t b = at(i + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
    return 0;
  }

  size_t RunOf(size_t k, uint8_t bits) const {
    while (Is(k, bits)) ++k;
    return k;
  }

  // GPT-2's ` ?\p{L}+` and ` ?\p{N}+`.
  size_t SpaceThen(size_t i, uint8_t bits) const {
    const size_t j = cp_[i] == ' ' ? i + 1 : i;
    if (Is(j, bits)) return RunOf(j, bits);
    return 0;
  }

  // [^\r\n\p{L}\p{N}]?\p{L}+
  size_t PrefixedLetters(size_t i) const {
    if (Is(i, kLetter)) return RunOf(i, kLetter);
    if (!Is(i, kNumber) && !IsNewline(i) && Is(i + 1, kLetter)) return RunOf(i + 1, kLetter);
    return 0;
  }

  size_t Digits(size_t i, size_t max) const {
    size_t k = i;
    while (k - i < max && Is(k, kNumber)) ++k;
    return k == i ? 0 : k;
  }

  bool IsPunct(size_t k) const { return k < n_ && !Is(k, kSpace | kLetter | kNumber); }

  // ` ?[^\s\p{L}\p{N}]+` followed by [\r\n]* (cl100k) or [\r\n/]* (o200k).
  size_t SpacePunct(size_t i, bool trail_slash, bool trail_newlines) const {
    size_t j = cp_[i] == ' ' && IsPunct(i + 1) ? i + 1 : i;
    if (!IsPunct(j)) return 0;
    while (IsPunct(j)) ++j;
    if (trail_newlines) {
      while (IsNewline(j) || (trail_slash && j < n_ && cp_[j] == '/')) ++j;
    }
    return j;
  }

  // \s*[\r\n]+ (when newline_alt), then \s+(?!\S), then \s+. REQUIRES: cp_[i] is \s or
  // nothing else matched (then it is a lone character the caller steps over).
  size_t Whitespace(size_t i, bool newline_alt) const {
    if (!Is(i, kSpace)) return i + 1;
    const size_t e = RunOf(i, kSpace);
    reach_ = std::max(reach_, e);
    if (newline_alt) {
      for (size_t k = e; k > i; --k) {
        if (IsNewline(k - 1)) return k;
      }
    }
    if (e == n_) return e;
    if (e - 1 > i) return e - 1;
    return e;
  }

  // o200k's two word alternatives:
  //   P? [U]* [L]+ C?   (lower_first)   and   P? [U]+ [L]* C?
  // with U = Lu Lt Lm Lo M, L = Ll Lm Lo M, P = [^\r\n\p{L}\p{N}], C = a contraction.
  size_t O200kWord(size_t i, bool lower_first) const {
    if (!IsNewline(i) && !Is(i, kLetter | kNumber)) {
      const size_t e = O200kBody(i + 1, lower_first);
      if (e != 0) return e;
    }
    return O200kBody(i, lower_first);
  }
  bool IsU(size_t k) const {
    return k < n_ && ((cls_[k] & (kLetter | kMark)) != 0 && (cls_[k] & kLower) == 0);
  }
  bool IsL(size_t k) const {
    return k < n_ && ((cls_[k] & (kLetter | kMark)) != 0 && (cls_[k] & kUpperish) == 0);
  }
  size_t O200kBody(size_t p, bool lower_first) const {
    size_t a = p;
    while (IsU(a)) ++a;
    reach_ = std::max(reach_, a);
    size_t end;
    if (lower_first) {
      // [U]* backs off until [L]+ can start: the largest b <= a with L at b.
      if (IsL(a)) {
        end = a;
        while (IsL(end)) ++end;
      } else {
        size_t b = a;
        while (b > p && !IsL(b - 1)) --b;
        if (b == p) return 0;
        end = b;  // L at b-1; the character after it (if < a) is not L
      }
    } else {
      if (a == p) return 0;
      end = a;
      while (IsL(end)) ++end;
    }
    const size_t c = Contraction(end, /*ignore_case=*/true);
    return c != 0 ? c : end;
  }

  const SplitPattern p_;
  const std::vector<char32_t>& cp_;
  const std::vector<uint8_t>& cls_;
  const size_t n_;
  mutable size_t reach_ = 0;
};

}  // namespace

std::optional<SplitPattern> RecognizeSplitPattern(std::string_view regex) {
  for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kCl100k, SplitPattern::kQwen2,
                         SplitPattern::kO200k}) {
    if (regex == SplitPatternSource(p)) return p;
  }
  return std::nullopt;
}

std::string_view SplitPatternSource(SplitPattern pattern) {
  switch (pattern) {
    case SplitPattern::kGpt2: return kGpt2Source;
    case SplitPattern::kCl100k: return kCl100kSource;
    case SplitPattern::kQwen2: return kQwen2Source;
    case SplitPattern::kO200k: return kO200kSource;
  }
  return {};
}

namespace {

// Scans text from its start and returns how many bytes of it were emitted as final
// matches: all of it when `last`, else up to the first match the end could still change;
// npos when a match is longer than max_match characters (0: no limit).
size_t ScanWindows(SplitPattern pattern, std::string_view text, bool last, size_t window,
                   size_t max_match, PieceSink sink) {
  // Decode buffers kept per thread (this runs once per piece of every document), one per
  // nesting level: the sink may scan again (a Sequence of two splitting steps).
  constexpr int kKeptLevels = 4;
  thread_local Chars kept[kKeptLevels];
  thread_local int level = 0;
  Chars local;
  Chars& chars = level < kKeptLevels ? kept[level] : local;
  struct Nest {
    int& level;
    explicit Nest(int& l) : level(l) { ++level; }
    ~Nest() { --level; }
  } nest(level);
  if (window == 0) window = kDefaultSplitWindow;
  size_t begin = 0, size = window;
  while (begin < text.size()) {
    Decode(text, begin, size, &chars);
    const bool at_end = chars.byte[chars.n] == text.size();
    const bool final = last && at_end;
    const Scanner scanner(pattern, chars);
    size_t i = 0;
    while (i < chars.n) {
      const size_t e = scanner.MatchAt(i);
      // A match that looked at the window's end may have ended otherwise in the whole text.
      if (!final && (e + kSplitLookahead > chars.n || scanner.reach() >= chars.n)) break;
      sink(text.substr(chars.byte[i], chars.byte[e] - chars.byte[i]));
      i = e;
    }
    begin = chars.byte[i];
    if (final || (at_end && !last)) break;
    // No match fitted: one is longer than the window, which grows to hold it.
    if (i == 0 && max_match != 0 && size > max_match) {
      begin = std::string_view::npos;
      break;
    }
    size = i == 0 ? size * 2 : window;
  }
  // Keep small buffers for the next call; give back what a long match grew.
  if (chars.cp.capacity() > kKeepChars) chars = Chars();
  return begin;
}

}  // namespace

void ScanSplit(SplitPattern pattern, std::string_view text, PieceSink sink, size_t window) {
  ScanWindows(pattern, text, /*last=*/true, window, /*max_match=*/0, sink);
}

void ScanSplit(SplitPattern pattern, std::string_view text,
               std::vector<std::string_view>* pieces) {
  ScanSplit(pattern, text, [&](std::string_view p) { pieces->push_back(p); });
}

bool SplitStream::Feed(std::string_view chunk, bool last, PieceSink sink) {
  size_t done;
  if (carry_.empty()) {
    done = ScanWindows(pattern_, chunk, last, window_, max_match_, sink);
    if (done != std::string_view::npos) carry_.assign(chunk.substr(done));
  } else {
    carry_.append(chunk);
    done = ScanWindows(pattern_, carry_, last, window_, max_match_, sink);
    if (done != std::string_view::npos) carry_.erase(0, done);
  }
  if (done == std::string_view::npos) {
    carry_.clear();
    return false;
  }
  return true;
}

}  // namespace zephon::tokenizer
