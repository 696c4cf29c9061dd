#include "tokenizer/pre_tokenizer.h"

#include <gtest/gtest.h>

namespace zephon::tokenizer {
namespace {

std::vector<std::string> Words(const PreTokenizer& p, std::string_view text, bool at_start) {
  std::deque<std::string> arena;
  std::vector<Word> words;
  p.Apply({text, at_start}, &arena, &words);
  std::vector<std::string> out;
  for (const Word& w : words) out.emplace_back(w.text);
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

}  // namespace
}  // namespace zephon::tokenizer
