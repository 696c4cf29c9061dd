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
