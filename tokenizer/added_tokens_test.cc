#include "tokenizer/added_tokens.h"

#include <gtest/gtest.h>

namespace zephon::tokenizer {
namespace {

using Pieces = std::vector<std::pair<std::string, int32_t>>;

Pieces Split(const AddedTokens& added, std::string_view text) {
  std::vector<Segment> segs;
  added.Split(text, &segs);
  Pieces out;
  for (const Segment& s : segs) out.emplace_back(std::string(s.text), s.id);
  return out;
}

AddedToken Tok(std::string content, int32_t id, bool special = true) {
  AddedToken t;
  t.content = std::move(content);
  t.id = id;
  t.special = special;
  return t;
}

TEST(AddedTokensTest, LeftmostLongestNonOverlapping) {
  AddedTokens added({Tok("<s>", 1), Tok("<s>x", 2), Tok("s>x<", 3)}, false);
  EXPECT_EQ(Split(added, "a<s>xb<s>"),
            (Pieces{{"a", -1}, {"<s>x", 2}, {"b", -1}, {"<s>", 1}}));
  EXPECT_TRUE(Split(added, "").empty());
  EXPECT_EQ(Split(added, "plain"), (Pieces{{"plain", -1}}));
}

TEST(AddedTokensTest, SplitSpecialTokensLeavesSpecialsAsText) {
  AddedTokens added({Tok("<|eot|>", 9), Tok("<think>", 10, /*special=*/false)}, true);
  EXPECT_EQ(Split(added, "a<|eot|><think>"),
            (Pieces{{"a<|eot|>", -1}, {"<think>", 10}}));
}

TEST(AddedTokensTest, LstripRstripAbsorbWhitespace) {
  AddedToken mask = Tok("<mask>", 4);
  mask.lstrip = true;
  mask.rstrip = true;
  AddedTokens added({mask}, false);
  EXPECT_EQ(Split(added, "a  <mask>\t b"), (Pieces{{"a", -1}, {"  <mask>\t ", 4}, {"b", -1}}));
}

TEST(AddedTokensTest, SingleWordOnlyBetweenNonWordCharacters) {
  AddedToken word = Tok("cat", 5, false);
  word.single_word = true;
  AddedTokens added({word}, false);
  EXPECT_EQ(Split(added, "concat cat."), (Pieces{{"concat ", -1}, {"cat", 5}, {".", -1}}));
  EXPECT_EQ(Split(added, "cats"), (Pieces{{"cats", -1}}));
}

}  // namespace
}  // namespace zephon::tokenizer
