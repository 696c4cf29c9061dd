#include "tokenizer/normalizer.h"

#include <gtest/gtest.h>

namespace zephon::tokenizer {
namespace {

std::string Apply(const Normalizer& n, std::string text) {
  EXPECT_TRUE(n.Apply(&text).ok());
  return text;
}

TEST(NormalizerTest, Llama2PrependThenReplaceRunsInOrder) {
  const Normalizer n({{NormalizerStep::Kind::kPrepend, "", "▁"},
                      {NormalizerStep::Kind::kReplace, " ", "▁"}});
  EXPECT_EQ(Apply(n, "a b  c"), "▁a▁b▁▁c");
  EXPECT_EQ(Apply(n, " x"), "▁▁x");
  EXPECT_EQ(Apply(n, ""), "");  // HF prepends only to non-empty text
}

TEST(NormalizerTest, UnicodeFormsComposeOrFold) {
  EXPECT_EQ(Apply(Normalizer({{NormalizerStep::Kind::kNfc}}), "e\u0301"), "\u00e9");
  EXPECT_EQ(Apply(Normalizer({{NormalizerStep::Kind::kNfkc}}), "\u2460\uff41"), "1a");
  EXPECT_EQ(Apply(Normalizer({}), "unchanged"), "unchanged");
}

}  // namespace
}  // namespace zephon::tokenizer
