#include "common/digest.h"

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"

namespace zephon {
namespace {

TEST(DigestTest, Sha256MatchesFips180Vectors) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(absl::BytesToHexString(Sha256("abc")), Sha256Hex("abc"));
}

TEST(DigestTest, HmacSha256MatchesRfc4231) {
  // RFC 4231, test case 2.
  EXPECT_EQ(absl::BytesToHexString(HmacSha256("Jefe", "what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

}  // namespace
}  // namespace zephon
