#include "tokenizer/pre_tokenizer.h"

#include <random>

#include <gtest/gtest.h>

namespace zephon::tokenizer {
namespace {

std::vector<std::string> Words(const PreTokenizer& p, std::string_view text, bool at_start,
                               size_t window = 0) {
  std::vector<std::string> out;
  p.Apply({text, at_start}, [&](Word w) { out.emplace_back(w.text); }, window);
  return out;
}

// Words (with their at_text_start flags, as "^word") of `text` fed to a PreTokenizerStream
// in chunks of about `chunk` bytes, whole characters each; one-word pieces are cut before
// each space the cut finder sees.
std::vector<std::string> Streamed(const PreTokenizer& p, std::string_view text, bool at_start,
                                  size_t chunk, size_t window) {
  std::vector<std::string> out;
  auto cut = [](std::string_view w) {
    const size_t k = w.rfind(' ');
    return k == std::string_view::npos ? 0 : k;
  };
  auto sink = [&](Word w) { out.push_back((w.at_text_start ? "^" : "") + std::string(w.text)); };
  PreTokenizerStream stream(p, at_start, window, /*max_word=*/0, cut, sink);
  size_t begin = 0;
  do {
    size_t end = std::min(text.size(), begin + chunk);
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    EXPECT_TRUE(stream.Feed(text.substr(begin, end - begin), end == text.size()).ok());
    begin = end;
  } while (begin < text.size());
  return out;
}

std::vector<std::string> Flagged(const PreTokenizer& p, std::string_view text, bool at_start) {
  std::vector<std::string> out;
  p.Apply({text, at_start},
          [&](Word w) { out.push_back((w.at_text_start ? "^" : "") + std::string(w.text)); });
  return out;
}

// Texts of what the scanners and Metaspace treat specially, joined at random: whitespace
// runs, digit runs, CJK, emoji ZWJ sequences, contractions and 's, marks, newlines.
std::vector<std::string> EdgeTexts(int n, uint32_t seed) {
  const std::vector<std::string> pool = {
      " ", "  ", "\t", "\t\t", "\n", "\r\n", "\n\n", "     ", "\u00a0", "\u3000",
      "\n        ", "        \n", "ABCDEFGH", "\u65e5ABCDEFGHIJ", "ABCDEFGHIJKabc",
      "a", "Z", "word", "CamelCase", "it", "'s", "'S", "'ll", "'ve", "'", "\u017f",
      "1", "12", "12345678", "\u0661\u0662", "\u00bd",
      "\u65e5\u672c\u8a9e", "\u4e2d\u6587", "\ud55c\uad6d", "\u0645\u0631\u062d\u0628\u0627",
      "\u0928\u092e\u0938\u094d\u0924\u0947", "e\u0301", "\u0308",
      "\U0001F468\u200D\U0001F469\u200D\U0001F467", "\U0001F44D\U0001F3FD", "\U0001F1FA\U0001F1F8",
      ".", "!!", "...", "/", "//", "(", ")", "\"", "\u2581", "\u2581\u2581"};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string t;
    const int parts = static_cast<int>(rng() % 40);
    for (int k = 0; k < parts; ++k) t += pool[rng() % pool.size()];
    out.push_back(t);
  }
  return out;
}

PreTokenizerStep Metaspace(PreTokenizerStep::Prepend scheme, bool split) {
  PreTokenizerStep s{PreTokenizerStep::Kind::kMetaspace};
  s.replacement = "▁";
  s.prepend_scheme = scheme;
  s.split = split;
  return s;
}

using Strings = std::vector<std::string>;

TEST(PreTokenizerTest, MetaspaceReplacesPrependsAndSplitsBeforeEachReplacement) {
  const PreTokenizer always({Metaspace(PreTokenizerStep::Prepend::kAlways, true)});
  EXPECT_EQ(Words(always, "Hey  there", false), (Strings{"▁Hey", "▁", "▁there"}));
  const PreTokenizer first({Metaspace(PreTokenizerStep::Prepend::kFirst, false)});
  EXPECT_EQ(Words(first, "a b", true), (Strings{"▁a▁b"}));
  EXPECT_EQ(Words(first, "a b", false), (Strings{"a▁b"}));  // not at the text's start
  const PreTokenizer never({Metaspace(PreTokenizerStep::Prepend::kNever, true)});
  EXPECT_EQ(Words(never, "a b", true), (Strings{"a", "▁b"}));
}

TEST(PreTokenizerTest, ByteLevelAddsPrefixSpaceAndSplitsWithGpt2sPattern) {
  PreTokenizerStep bl{PreTokenizerStep::Kind::kByteLevel};
  bl.add_prefix_space = true;
  bl.use_regex = true;
  EXPECT_EQ(Words(PreTokenizer({bl}), "Hi there", true), (Strings{" Hi", " there"}));
  EXPECT_EQ(Words(PreTokenizer({bl}), " x", true), (Strings{" x"}));  // already has one
}

TEST(PreTokenizerTest, SequenceSplitsThenAppliesByteLevelPerWord) {
  PreTokenizerStep split{PreTokenizerStep::Kind::kSplit, SplitPattern::kCl100k};
  PreTokenizerStep bl{PreTokenizerStep::Kind::kByteLevel};
  const PreTokenizer p({split, bl});
  EXPECT_EQ(Words(p, "it's 2024!", true), (Strings{"it", "'s", " ", "202", "4", "!"}));
  EXPECT_TRUE(Words(p, "", true).empty());
}

TEST(PreTokenizerTest, StreamedInChunksGivesTheWholePiecesWords) {
  PreTokenizerStep bl{PreTokenizerStep::Kind::kByteLevel};
  PreTokenizerStep bl_regex = bl, bl_prefix = bl;
  bl_regex.use_regex = true;
  bl_prefix.use_regex = true;
  bl_prefix.add_prefix_space = true;
  std::vector<PreTokenizer> pre;
  for (SplitPattern pattern : {SplitPattern::kGpt2, SplitPattern::kCl100k, SplitPattern::kQwen2,
                               SplitPattern::kO200k}) {
    pre.push_back(PreTokenizer({{PreTokenizerStep::Kind::kSplit, pattern}, bl}));
  }
  pre.push_back(PreTokenizer({bl_regex}));
  pre.push_back(PreTokenizer({bl_prefix}));
  for (auto scheme : {PreTokenizerStep::Prepend::kAlways, PreTokenizerStep::Prepend::kFirst,
                      PreTokenizerStep::Prepend::kNever}) {
    pre.push_back(PreTokenizer({Metaspace(scheme, true)}));
  }
  int checked = 0;
  for (const std::string& text : EdgeTexts(300, 14)) {
    for (size_t p = 0; p < pre.size(); ++p) {
      for (bool at_start : {true, false}) {
        const std::vector<std::string> whole = Flagged(pre[p], text, at_start);
        for (size_t chunk : {1, 3, 7, 1000}) {
          for (size_t window : {1, 2, 5, 9, 16, 33}) {
            ASSERT_EQ(Streamed(pre[p], text, at_start, chunk, window), whole)
                << "pre-tokenizer #" << p << " chunk " << chunk << " window " << window
                << " text '" << text << "'";
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 60000);
}

TEST(PreTokenizerTest, ASequenceOfTwoSplittingStepsScansEachWordAgain) {
  // Split(cl100k) then ByteLevel's GPT-2 regex: the second scan runs inside the first's.
  PreTokenizerStep bl{PreTokenizerStep::Kind::kByteLevel};
  bl.use_regex = true;
  const PreTokenizer p({{PreTokenizerStep::Kind::kSplit, SplitPattern::kCl100k}, bl});
  for (const std::string& text : EdgeTexts(100, 21)) {
    std::vector<std::string_view> first;
    ScanSplit(SplitPattern::kCl100k, text, &first);
    std::vector<std::string> expected;
    for (std::string_view w : first) {
      std::vector<std::string_view> second;
      ScanSplit(SplitPattern::kGpt2, w, &second);
      expected.insert(expected.end(), second.begin(), second.end());
    }
    for (size_t window : {0, 2, 16}) {
      ASSERT_EQ(Words(p, text, true, window), expected) << text;
      std::vector<std::string> streamed;
      for (const std::string& w : Streamed(p, text, false, 5, window)) streamed.push_back(w);
      ASSERT_EQ(streamed, expected) << text;
    }
  }
}

TEST(PreTokenizerTest, OneWordPiecesAreCutOnlyWhereTheCutFinderAllows) {
  const PreTokenizer none({});
  const PreTokenizer meta({Metaspace(PreTokenizerStep::Prepend::kAlways, false)});
  // Whole when the window holds it; cut before the last space of each window otherwise.
  EXPECT_EQ(Streamed(none, "ab cd ef", true, 100, 100), (Strings{"^ab cd ef"}));
  EXPECT_EQ(Streamed(none, "ab cd ef", true, 100, 4), (Strings{"^ab", " cd", " ef"}));
  EXPECT_EQ(Streamed(none, "ab cd ef", false, 3, 4), (Strings{"ab", " cd", " ef"}));
  // Metaspace replaces the spaces first: the finder, looking for ' ', finds none.
  EXPECT_EQ(Streamed(meta, "ab cd", true, 2, 2), (Strings{"^▁ab▁cd"}));
  // A word longer than max_word is refused.
  PreTokenizerStream stream(none, true, 4, /*max_word=*/6, [](std::string_view) { return size_t{0}; },
                            [](Word) {});
  EXPECT_TRUE(stream.Feed("abcd", false).ok());
  EXPECT_EQ(stream.Feed("efgh", false).code(), absl::StatusCode::kResourceExhausted);
}

TEST(PreTokenizerTest, StreamRefusesASplitMatchLongerThanMaxWord) {
  const PreTokenizer p({{PreTokenizerStep::Kind::kSplit, SplitPattern::kCl100k}});
  std::vector<std::string> words;
  PreTokenizerStream ok(p, true, 4, /*max_word=*/64, [](std::string_view) { return size_t{0}; },
                        [&](Word w) { words.emplace_back(w.text); });
  EXPECT_TRUE(ok.Feed(std::string(40, 'x') + " y", true).ok());
  EXPECT_EQ(words, (Strings{std::string(40, 'x'), " y"}));
  PreTokenizerStream refused(p, true, 4, /*max_word=*/64,
                             [](std::string_view) { return size_t{0}; }, [](Word) {});
  EXPECT_EQ(refused.Feed(std::string(300, 'x'), true).code(),
            absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace zephon::tokenizer
