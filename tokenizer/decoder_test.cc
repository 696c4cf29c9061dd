#include "tokenizer/decoder.h"

#include <gtest/gtest.h>

namespace zephon::tokenizer {
namespace {

TEST(DecoderTest, ByteLevelTableIsGpt2s) {
  EXPECT_EQ(ByteLevelChar(' '), "Ġ");
  EXPECT_EQ(ByteLevelChar('\n'), "Ċ");
  EXPECT_EQ(ByteLevelChar('a'), "a");
  for (int b = 0; b < 256; ++b) {
    const std::string& ch = ByteLevelChar(static_cast<unsigned char>(b));
    ASSERT_FALSE(ch.empty());
  }
  EXPECT_EQ(ByteOfByteLevelChar(U'Ġ'), ' ');
  EXPECT_EQ(ByteOfByteLevelChar(U'日'), -1);
}

TEST(DecoderTest, ByteLevelMapsCharactersBackAndKeepsOthers) {
  const Decoder d({{DecoderStep::Kind::kByteLevel}}, true);
  // "é" is bytes C3 A9, written as Ã ©; an added token with unmappable text stays as is.
  EXPECT_EQ(d.Decode({"Hello", "Ġw", "Ã©", "<|日|>"}), "Hello wé<|日|>");
  // A lone continuation byte becomes U+FFFD.
  EXPECT_EQ(d.Decode({"©"}), "\xef\xbf\xbd");
}

TEST(DecoderTest, Llama2ChainReplacesFallsBackFusesAndStrips) {
  const Decoder d({{DecoderStep::Kind::kReplace, "▁", " "},
                   {DecoderStep::Kind::kByteFallback},
                   {DecoderStep::Kind::kFuse},
                   {DecoderStep::Kind::kStrip, "", " ", 1, 0}},
                  true);
  EXPECT_EQ(d.Decode({"▁Hello", "▁", "<0xE6>", "<0x97>", "<0xA5>", "x"}), "Hello 日x");
  // Invalid byte runs become one U+FFFD per byte, as HF does.
  EXPECT_EQ(d.Decode({"a", "<0xE6>", "<0x97>"}), "a\xef\xbf\xbd\xef\xbf\xbd");
}

TEST(DecoderTest, MetaspaceDropsTheFirstPrefixOnly) {
  const Decoder d({{DecoderStep::Kind::kMetaspace, "", "▁", 0, 0, DecoderStep::Prepend::kAlways}},
                  true);
  EXPECT_EQ(d.Decode({"▁Hey", "▁there"}), "Hey there");
  const Decoder never(
      {{DecoderStep::Kind::kMetaspace, "", "▁", 0, 0, DecoderStep::Prepend::kNever}}, true);
  EXPECT_EQ(never.Decode({"▁Hey"}), " Hey");
}

TEST(DecoderTest, NoDecoderJoinsWithSpaces) {
  EXPECT_EQ(Decoder({}, false).Decode({"a", "b"}), "a b");
}

}  // namespace
}  // namespace zephon::tokenizer
