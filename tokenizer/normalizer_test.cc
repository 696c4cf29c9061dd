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

// The chunks of `text` cut wherever SafeCutAt allows, normalized and joined.
std::string Chunked(const Normalizer& n, std::string_view text) {
  std::string out;
  size_t begin = 0;
  for (size_t k = 1; k <= text.size(); ++k) {
    if (k < text.size() &&
        ((static_cast<unsigned char>(text[k]) & 0xC0) == 0x80 || !n.SafeCutAt(text, k))) {
      continue;
    }
    EXPECT_TRUE(n.ApplyChunk(text.substr(begin, k - begin), begin == 0, &out).ok());
    begin = k;
  }
  return out;
}

TEST(NormalizerTest, ChunksCutWhereSafeNormalizeAsTheWholeText) {
  const std::string text = "a e\u0301 \u1100\u1161\u11a8 \u2460 x\u0308\u0301 \ufb01 \u00c5";
  const Normalizer llama2({{NormalizerStep::Kind::kPrepend, "", "▁"},
                           {NormalizerStep::Kind::kReplace, " ", "▁"}});
  const Normalizer nfc({{NormalizerStep::Kind::kNfc}});
  const Normalizer nfkc_then_replace({{NormalizerStep::Kind::kNfkc},
                                      {NormalizerStep::Kind::kReplace, " ", "▁"}});
  for (const Normalizer* n : {&llama2, &nfc, &nfkc_then_replace}) {
    ASSERT_TRUE(n->Chunkable());
    EXPECT_EQ(Chunked(*n, text), Apply(*n, text));
  }
  // No cut inside a decomposed character: the mark joins the letter before it.
  EXPECT_FALSE(nfc.SafeCutAt("e\u0301", 1));
  EXPECT_TRUE(nfc.SafeCutAt("e\u0301", 0));
  // Not chunkable: a Replace pattern of two characters, an empty content, NFC after Replace.
  EXPECT_FALSE(Normalizer({{NormalizerStep::Kind::kReplace, "ab", "c"}}).Chunkable());
  EXPECT_FALSE(Normalizer({{NormalizerStep::Kind::kReplace, "a", ""}}).Chunkable());
  EXPECT_FALSE(Normalizer({{NormalizerStep::Kind::kReplace, " ", "▁"},
                           {NormalizerStep::Kind::kNfc}}).Chunkable());
}

}  // namespace
}  // namespace zephon::tokenizer
