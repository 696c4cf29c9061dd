#include "tokenizer/split_scanner.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace zephon::tokenizer {
namespace {

// Expected pieces are HF tokenizers' own (0.22, Oniguruma): word boundaries of
// Tokenizer.encode on Qwen 3's vocabulary with each pattern as its Split regex (GPT-2:
// ByteLevel use_regex), read back through the encoding's word ids and offsets.
struct Case {
  std::string text;
  std::vector<std::string> pieces;
};

const Case kGpt2Cases[] = {
    {"Hello world's  \n\n x",
     {"Hello", " world", "'s", "  \n\n", " x"}},
    {"I'LL it'S x'ſ",
     {"I", "'", "LL", " it", "'", "S", " x", "'", "ſ"}},
    {"12345 ١٢٣ ½x",
     {"12345", " ١٢٣", " ½", "x"}},
    {"a  b\t\tc   ",
     {"a", " ", " b", "\t", "\t", "c", "   "}},
    {"(foo) [bar]\r\n\r\n  baz",
     {"(", "foo", ")", " [", "bar", "]", "\r\n\r\n ", " baz"}},
    {"HELLOWorld CamelCase x/y//\n",
     {"HELLOWorld", " CamelCase", " x", "/", "y", "//", "\n"}},
    {"日本語 ...!!! ?!\n",
     {"日本語", " ...!!!", " ?!", "\n"}},
    {" Ünïcödé é ὈΔΥΣΣΕΎΣ",
     {" Ünïcödé", " e", "́", " ὈΔΥΣΣΕΎΣ"}},
    {"a'ſt b'ſ 'K 'ſ'ſ x'Ka",
     {"a", "'", "ſt", " b", "'", "ſ", " '", "K", " '", "ſ", "'", "ſ", " x", "'", "Ka"}},
};

const Case kCl100kCases[] = {
    {"Hello world's  \n\n x",
     {"Hello", " world", "'s", "  \n\n", " x"}},
    {"I'LL it'S x'ſ",
     {"I", "'LL", " it", "'S", " x", "'ſ"}},
    {"12345 ١٢٣ ½x",
     {"123", "45", " ", "١٢٣", " ", "½", "x"}},
    {"a  b\t\tc   ",
     {"a", " ", " b", "\t", "\tc", "   "}},
    {"(foo) [bar]\r\n\r\n  baz",
     {"(foo", ")", " [", "bar", "]\r\n\r\n", " ", " baz"}},
    {"HELLOWorld CamelCase x/y//\n",
     {"HELLOWorld", " CamelCase", " x", "/y", "//\n"}},
    {"日本語 ...!!! ?!\n",
     {"日本語", " ...!!!", " ?!\n"}},
    {" Ünïcödé é ὈΔΥΣΣΕΎΣ",
     {" Ünïcödé", " e", "́", " ὈΔΥΣΣΕΎΣ"}},
    {"a'ſt b'ſ 'K 'ſ'ſ x'Ka",
     {"a", "'ſ", "t", " b", "'ſ", " '", "K", " '", "ſ", "'ſ", " x", "'Ka"}},
};

const Case kQwen2Cases[] = {
    {"Hello world's  \n\n x",
     {"Hello", " world", "'s", "  \n\n", " x"}},
    {"I'LL it'S x'ſ",
     {"I", "'LL", " it", "'S", " x", "'ſ"}},
    {"12345 ١٢٣ ½x",
     {"1", "2", "3", "4", "5", " ", "١", "٢", "٣", " ", "½", "x"}},
    {"a  b\t\tc   ",
     {"a", " ", " b", "\t", "\tc", "   "}},
    {"(foo) [bar]\r\n\r\n  baz",
     {"(foo", ")", " [", "bar", "]\r\n\r\n", " ", " baz"}},
    {"HELLOWorld CamelCase x/y//\n",
     {"HELLOWorld", " CamelCase", " x", "/y", "//\n"}},
    {"日本語 ...!!! ?!\n",
     {"日本語", " ...!!!", " ?!\n"}},
    {" Ünïcödé é ὈΔΥΣΣΕΎΣ",
     {" Ünïcödé", " e", "́", " ὈΔΥΣΣΕΎΣ"}},
    {"a'ſt b'ſ 'K 'ſ'ſ x'Ka",
     {"a", "'ſ", "t", " b", "'ſ", " '", "K", " '", "ſ", "'ſ", " x", "'Ka"}},
};

const Case kO200kCases[] = {
    {"Hello world's  \n\n x",
     {"Hello", " world's", "  \n\n", " x"}},
    {"I'LL it'S x'ſ",
     {"I'LL", " it'S", " x'ſ"}},
    {"12345 ١٢٣ ½x",
     {"123", "45", " ", "١٢٣", " ", "½", "x"}},
    {"a  b\t\tc   ",
     {"a", " ", " b", "\t", "\tc", "   "}},
    {"(foo) [bar]\r\n\r\n  baz",
     {"(foo", ")", " [", "bar", "]\r\n\r\n", " ", " baz"}},
    {"HELLOWorld CamelCase x/y//\n",
     {"HELLOWorld", " Camel", "Case", " x", "/y", "//\n"}},
    {"日本語 ...!!! ?!\n",
     {"日本語", " ...!!!", " ?!\n"}},
    {" Ünïcödé é ὈΔΥΣΣΕΎΣ",
     {" Ünïcödé", " é", " ὈΔΥΣΣΕΎΣ"}},
    {"a'ſt b'ſ 'K 'ſ'ſ x'Ka",
     {"a'ſ", "t", " b'ſ", " '", "K", " '", "ſ'ſ", " x", "'Ka"}},
};

std::vector<std::string> Scan(SplitPattern p, const std::string& text) {
  std::vector<std::string_view> views;
  ScanSplit(p, text, &views);
  return std::vector<std::string>(views.begin(), views.end());
}

TEST(SplitScannerTest, Gpt2MatchesHfTokenizers) {
  for (const Case& c : kGpt2Cases) {
    EXPECT_EQ(Scan(SplitPattern::kGpt2, c.text), c.pieces) << c.text;
  }
}

TEST(SplitScannerTest, Cl100kMatchesHfTokenizers) {
  for (const Case& c : kCl100kCases) {
    EXPECT_EQ(Scan(SplitPattern::kCl100k, c.text), c.pieces) << c.text;
  }
}

TEST(SplitScannerTest, Qwen2MatchesHfTokenizers) {
  for (const Case& c : kQwen2Cases) {
    EXPECT_EQ(Scan(SplitPattern::kQwen2, c.text), c.pieces) << c.text;
  }
}

TEST(SplitScannerTest, O200kMatchesHfTokenizers) {
  for (const Case& c : kO200kCases) {
    EXPECT_EQ(Scan(SplitPattern::kO200k, c.text), c.pieces) << c.text;
  }
}

TEST(SplitScannerTest, SmallWindowsAndChunksFindTheWholeTextsMatches) {
  // Every case text, repeated and joined: windows of 1..9 characters put an edge at every
  // position of each construct (whitespace before a non-space, contractions, digit runs).
  std::string text;
  for (const auto* cases : {&kGpt2Cases, &kCl100kCases, &kO200kCases}) {
    for (const Case& c : *cases) text += c.text + c.text;
  }
  for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kCl100k, SplitPattern::kQwen2,
                         SplitPattern::kO200k}) {
    const std::vector<std::string> whole = Scan(p, text);
    for (size_t window = 1; window < 10; ++window) {
      std::vector<std::string> got;
      ScanSplit(p, text, [&](std::string_view piece) { got.emplace_back(piece); }, window);
      ASSERT_EQ(got, whole) << "window " << window;
      // The same text fed to a SplitStream in chunks of `window` bytes (whole characters).
      got.clear();
      SplitStream stream(p, window, /*max_match=*/0);
      for (size_t begin = 0; begin < text.size();) {
        size_t end = std::min(text.size(), begin + window);
        while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
        ASSERT_TRUE(stream.Feed(std::string_view(text).substr(begin, end - begin),
                                end == text.size(),
                                [&](std::string_view piece) { got.emplace_back(piece); }));
        begin = end;
      }
      ASSERT_EQ(got, whole) << "chunks of " << window;
    }
  }
}

TEST(SplitScannerTest, StreamRefusesAMatchLongerThanMaxMatch) {
  SplitStream stream(SplitPattern::kCl100k, 4, /*max_match=*/32);
  std::vector<std::string> got;
  auto sink = [&](std::string_view piece) { got.emplace_back(piece); };
  EXPECT_TRUE(stream.Feed(std::string(20, 'a') + " b", true, sink));
  EXPECT_EQ(got, (std::vector<std::string>{std::string(20, 'a'), " b"}));
  SplitStream refused(SplitPattern::kCl100k, 4, /*max_match=*/32);
  EXPECT_FALSE(refused.Feed(std::string(100, 'a'), true, sink));
}

TEST(SplitScannerTest, RecognizesOnlyTheExactPatternStrings) {
  for (SplitPattern p : {SplitPattern::kGpt2, SplitPattern::kCl100k, SplitPattern::kQwen2,
                         SplitPattern::kO200k}) {
    EXPECT_EQ(RecognizeSplitPattern(SplitPatternSource(p)), p);
  }
  EXPECT_EQ(RecognizeSplitPattern(R"(\s+)"), std::nullopt);
  EXPECT_EQ(RecognizeSplitPattern(std::string(SplitPatternSource(SplitPattern::kCl100k)) + " "),
            std::nullopt);
}

TEST(SplitScannerTest, PiecesCoverTheTextAndEmptyTextHasNone) {
  EXPECT_TRUE(Scan(SplitPattern::kCl100k, "").empty());
  const std::string text = "a\u2028b \U0001F600\U0001F600 c\r\n\r";
  std::string joined;
  for (const std::string& p : Scan(SplitPattern::kO200k, text)) joined += p;
  EXPECT_EQ(joined, text);
}

}  // namespace
}  // namespace zephon::tokenizer
