#include "client/encode_batch.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zephon::client {
namespace {

using tokenizer::SpecialTokens;
using tokenizer::Tokenizer;

// A byte-level-free toy: a WordLevel-like BPE over single letters with one
// merge, a BOS and an EOS, and no post-processor.
constexpr char kJson[] = R"json({
  "version": "1.0",
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true, "normalized": false},
    {"id": 1, "content": "<s>", "special": true, "normalized": false},
    {"id": 2, "content": "</s>", "special": true, "normalized": false}
  ],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null,
  "post_processor": null,
  "decoder": null,
  "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "fuse_unk": true,
    "byte_fallback": false,
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "▁": 3, "a": 4, "b": 5, "▁a": 6, "ab": 7},
    "merges": ["▁ a", "a b"]}
})json";

std::unique_ptr<Tokenizer> Make(tokenizer::TokenizerOptions options = {}) {
  auto tok = Tokenizer::FromJson(kJson, options);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

std::vector<std::string> Documents(int n) {
  std::vector<std::string> docs;
  for (int i = 0; i < n; ++i) {
    std::string doc;
    for (int j = 0; j < i % 23; ++j) doc += (j * 7 + i) % 3 == 0 ? "a b " : "ab";
    docs.push_back(doc);
  }
  return docs;
}

TEST(EncodeBatchTest, EqualsPerDocumentEncodeInInputOrderForAnyThreadCount) {
  auto tok = Make();
  ASSERT_NE(tok, nullptr);
  const std::vector<std::string> docs = Documents(200);
  const std::vector<std::string_view> views(docs.begin(), docs.end());
  for (uint32_t threads : {1u, 2u, 3u, 0u, 64u}) {
    auto batch = EncodeBatch(*tok, views, SpecialTokens::kBosEos, threads);
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_EQ(batch->offsets.size(), docs.size() + 1);
    EXPECT_EQ(batch->offsets.front(), 0u);
    EXPECT_EQ(batch->offsets.back(), batch->ids.size());
    for (size_t i = 0; i < docs.size(); ++i) {
      std::vector<int32_t> got(batch->ids.begin() + batch->offsets[i],
                               batch->ids.begin() + batch->offsets[i + 1]);
      EXPECT_EQ(got, *tok->Encode(docs[i], SpecialTokens::kBosEos))
          << "document " << i << " with " << threads << " threads";
    }
  }
}

TEST(EncodeBatchTest, NoDocumentsGiveOneOffset) {
  auto tok = Make();
  auto batch = EncodeBatch(*tok, {}, SpecialTokens::kNone, 4);
  ASSERT_TRUE(batch.ok()) << batch.status();
  EXPECT_TRUE(batch->ids.empty());
  EXPECT_EQ(batch->offsets, std::vector<uint64_t>{0});
}

TEST(EncodeBatchTest, MissingBosIsRefusedBeforeEncoding) {
  // A tokenizer whose BOS is unknown: no post-processor, and the names are not
  // the well-known ones.
  std::string json = kJson;
  for (auto [from, to] : {std::pair<std::string, std::string>{"\"<s>\"", "\"[x]\""}}) {
    for (size_t at; (at = json.find(from)) != std::string::npos;) json.replace(at, from.size(), to);
  }
  auto tok = Tokenizer::FromJson(json);
  ASSERT_TRUE(tok.ok()) << tok.status();
  ASSERT_FALSE((*tok)->bos_token_id().has_value()) << "the toy must have no BOS";
  const std::vector<std::string_view> views = {"a", "b"};
  auto batch = EncodeBatch(**tok, views, SpecialTokens::kBos, 2);
  EXPECT_EQ(batch.status().code(), absl::StatusCode::kFailedPrecondition) << batch.status();
}

}  // namespace
}  // namespace zephon::client
