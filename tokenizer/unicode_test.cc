#include "tokenizer/unicode.h"

#include <string>

#include <gtest/gtest.h>

namespace zephon::tokenizer {
namespace {

TEST(UnicodeTest, ClassesFollowUnicodeCategoriesAndWhiteSpace) {
  EXPECT_TRUE(ClassOf('a') & kLetter);
  EXPECT_TRUE(ClassOf('A') & kUpperish);
  EXPECT_TRUE(ClassOf(U'日') & kLetter);
  EXPECT_TRUE(ClassOf('7') & kNumber);
  EXPECT_TRUE(ClassOf(U'½') & kNumber);      // No
  EXPECT_TRUE(ClassOf(U'Ⅻ') & kNumber);      // Nl
  EXPECT_TRUE(ClassOf(U'\u0301') & kMark);
  for (char32_t space : {U' ', U'\t', U'\n', U'\r', U'\u00a0', U'\u3000', U'\u2028', U'\u0085'}) {
    EXPECT_TRUE(ClassOf(space) & kSpace) << static_cast<uint32_t>(space);
  }
  EXPECT_FALSE(ClassOf(U'\u200b') & kSpace);  // zero width space is not White_Space
  EXPECT_EQ(ClassOf('!'), 0);
}

TEST(UnicodeTest, InvalidUtf8IsReplacedAsPythonDoes) {
  EXPECT_TRUE(IsValidUtf8("plain \xc3\xa9 \xf0\x9f\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("\xff"));
  EXPECT_FALSE(IsValidUtf8("\xed\xa0\x80"));  // a surrogate
  EXPECT_FALSE(IsValidUtf8("\xc0\xaf"));      // overlong
  const std::string fffd = "\xef\xbf\xbd";
  // b"a\xffb".decode("utf-8", "replace") == "a\ufffdb"
  EXPECT_EQ(ReplaceInvalidUtf8("a\xff" "b"), "a" + fffd + "b");
  // A truncated sequence is one replacement (its maximal valid prefix).
  EXPECT_EQ(ReplaceInvalidUtf8("x\xe6\x97"), "x" + fffd);
  // Surrogates: every byte is replaced (\xa0 is not a valid second byte after \xed).
  EXPECT_EQ(ReplaceInvalidUtf8("\xed\xa0\x80"), fffd + fffd + fffd);
  EXPECT_EQ(ReplaceInvalidUtf8("ok"), "ok");
}

TEST(UnicodeTest, NormalizesWithIcu) {
  std::string out;
  ASSERT_TRUE(Normalize(NormalForm::kNfc, "cafe\u0301", &out).ok());
  EXPECT_EQ(out, "caf\u00e9");
  out.clear();
  ASSERT_TRUE(Normalize(NormalForm::kNfkc, "\ufb01 \uff21", &out).ok());
  EXPECT_EQ(out, "fi A");
  out.clear();
  ASSERT_TRUE(Normalize(NormalForm::kNfc, "ascii stays", &out).ok());
  EXPECT_EQ(out, "ascii stays");
}

}  // namespace
}  // namespace zephon::tokenizer
