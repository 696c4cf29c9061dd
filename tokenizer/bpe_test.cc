#include "tokenizer/bpe.h"

#include <random>

#include <gtest/gtest.h>

namespace zephon::tokenizer {
namespace {

using Vocab = std::vector<std::pair<std::string, int32_t>>;
using Merges = std::vector<std::pair<std::string, std::string>>;

std::vector<int32_t> Enc(const Bpe& bpe, std::string_view word) {
  std::vector<int32_t> ids;
  bpe.Encode(word, &ids);
  return ids;
}

TEST(BpeTest, LowestRankMergesFirstLeftmostOnTies) {
  Vocab vocab = {{"a", 0}, {"b", 1}, {"ab", 2}, {"aa", 3}, {"aab", 4}};
  // "aa" outranks "ab": "aab" -> (aa)b -> aab.
  auto bpe = Bpe::Create(vocab, {{"a", "a"}, {"a", "b"}, {"aa", "b"}}, {}, "test");
  ASSERT_TRUE(bpe.ok()) << bpe.status();
  EXPECT_EQ(Enc(**bpe, "aab"), (std::vector<int32_t>{4}));
  // "aaa": the leftmost pair merges, leaving "aa" "a".
  EXPECT_EQ(Enc(**bpe, "aaa"), (std::vector<int32_t>{3, 0}));
  // "ab" first when it outranks "aa": "aab" -> a(ab), no merge a+ab.
  auto other = Bpe::Create(vocab, {{"a", "b"}, {"a", "a"}}, {}, "test");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(Enc(**other, "aab"), (std::vector<int32_t>{0, 2}));
  // Cached and uncached answers agree.
  EXPECT_EQ(Enc(**other, "aab"), (std::vector<int32_t>{0, 2}));
}

TEST(BpeTest, LastSafeCutIsWhereNoMergeJoinsAndPartsEncodeAsTheWhole) {
  Vocab vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}};
  auto bpe = Bpe::Create(vocab, {{"a", "b"}, {"b", "c"}, {"ab", "c"}}, {}, "test");
  ASSERT_TRUE(bpe.ok());
  // Joinable pairs: a|b, b|c. "d" is no token: never cut beside it.
  EXPECT_EQ((*bpe)->LastSafeCut("abcab"), 3u);  // c|a
  EXPECT_EQ((*bpe)->LastSafeCut("abab"), 2u);   // b|a
  EXPECT_EQ((*bpe)->LastSafeCut("abc"), 0u);
  EXPECT_EQ((*bpe)->LastSafeCut("adab"), 0u);
  EXPECT_EQ((*bpe)->LastSafeCut("a"), 0u);
  // Cut repeatedly, the parts' ids are the whole word's.
  std::mt19937 rng(3);
  for (int n = 0; n < 300; ++n) {
    std::string word;
    for (int k = static_cast<int>(rng() % 30); k >= 0; --k) word += "abc"[rng() % 3];
    std::vector<int32_t> parts;
    std::string_view rest = word;
    std::vector<std::string_view> pieces;
    for (size_t cut; (cut = (*bpe)->LastSafeCut(rest)) != 0; rest = rest.substr(0, cut)) {
      pieces.push_back(rest.substr(cut));
    }
    pieces.push_back(rest);
    for (auto it = pieces.rbegin(); it != pieces.rend(); ++it) (*bpe)->Encode(*it, &parts);
    ASSERT_EQ(parts, Enc(**bpe, word)) << word;
  }
  // ignore_merges looks whole words up: never cut.
  BpeOptions ignore;
  ignore.ignore_merges = true;
  auto whole = Bpe::Create(vocab, {{"a", "b"}}, ignore, "test");
  EXPECT_EQ((*whole)->LastSafeCut("cc"), 0u);
}

TEST(BpeTest, ByteFallbackAndFusedUnk) {
  Vocab vocab = {{"<unk>", 0}, {"a", 1}, {"<0xC3>", 2}, {"<0xA9>", 3}};
  BpeOptions fallback;
  fallback.byte_fallback = true;
  fallback.unk_token = "<unk>";
  auto bpe = Bpe::Create(vocab, {}, fallback, "test");
  ASSERT_TRUE(bpe.ok());
  EXPECT_EQ(Enc(**bpe, "a\u00e9"), (std::vector<int32_t>{1, 2, 3}));  // é = C3 A9
  EXPECT_EQ(Enc(**bpe, "a\u4e2d"), (std::vector<int32_t>{1, 0}));     // bytes missing: unk
  BpeOptions fuse;
  fuse.unk_token = "<unk>";
  fuse.fuse_unk = true;
  auto fused = Bpe::Create(vocab, {}, fuse, "test");
  ASSERT_TRUE(fused.ok());
  EXPECT_EQ(Enc(**fused, "xyza"), (std::vector<int32_t>{0, 1}));
  fuse.fuse_unk = false;
  auto unfused = Bpe::Create(vocab, {}, fuse, "test");
  EXPECT_EQ(Enc(**unfused, "xya"), (std::vector<int32_t>{0, 0, 1}));
}

TEST(BpeTest, IgnoreMergesTakesWholeWordsFromTheVocabulary) {
  Vocab vocab = {{"a", 0}, {"b", 1}, {"c", 2}, {"bc", 3}, {"abc", 4}};
  BpeOptions options;
  options.ignore_merges = true;
  auto bpe = Bpe::Create(vocab, {{"b", "c"}}, options, "test");
  ASSERT_TRUE(bpe.ok());
  EXPECT_EQ(Enc(**bpe, "abc"), (std::vector<int32_t>{4}));  // no merge path needed
  EXPECT_EQ(Enc(**bpe, "bca"), (std::vector<int32_t>{3, 0}));
}

TEST(BpeTest, ByteUnitsSplitMultibyteCharacters) {
  Vocab vocab = {{"\xc3", 0}, {"\xa9", 1}, {"\xc3\xa9", 2}};
  BpeOptions options;
  options.byte_units = true;
  auto bpe = Bpe::Create(vocab, {{"\xc3", "\xa9"}}, options, "test");
  ASSERT_TRUE(bpe.ok());
  EXPECT_EQ(Enc(**bpe, "\xc3\xa9\xc3"), (std::vector<int32_t>{2, 0}));
}

TEST(BpeTest, ManyBpesOnOneThreadKeepTheirOwnCaches) {
  // More Bpes than a thread keeps caches for, with the same word meaning different ids.
  std::vector<std::unique_ptr<Bpe>> bpes;
  for (int32_t k = 0; k < 2 * static_cast<int32_t>(Bpe::kMaxCachesPerThread); ++k) {
    auto bpe = Bpe::Create({{"a", 10 * k}, {"b", 10 * k + 1}, {"ab", 10 * k + 2}},
                           {{"a", "b"}}, {}, "test");
    ASSERT_TRUE(bpe.ok());
    bpes.push_back(*std::move(bpe));
  }
  for (int round = 0; round < 2; ++round) {
    for (size_t k = 0; k < bpes.size(); ++k) {
      EXPECT_EQ(Enc(*bpes[k], "abab"), (std::vector<int32_t>{static_cast<int32_t>(10 * k + 2),
                                                             static_cast<int32_t>(10 * k + 2)}));
    }
  }
}

TEST(BpeTest, RefusesMergesOfUnknownTokensNamingTheEntry) {
  auto bpe = Bpe::Create({{"a", 0}, {"b", 1}}, {{"a", "b"}}, {}, "tokenizer.json: model");
  ASSERT_FALSE(bpe.ok());
  EXPECT_EQ(bpe.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bpe.status().message().find("tokenizer.json: model.merges[0]: 'ab' is not in"),
            std::string::npos)
      << bpe.status();
  auto unk = Bpe::Create({{"a", 0}}, {}, BpeOptions{false, false, false, false, "<unk>"}, "m");
  ASSERT_FALSE(unk.ok());
  EXPECT_NE(unk.status().message().find("m.unk_token '<unk>'"), std::string::npos);
}

}  // namespace
}  // namespace zephon::tokenizer
