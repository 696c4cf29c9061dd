#include "tokenizer/tokenizer.h"

#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_replace.h"
#include "common/temp_dir_testing.h"
#include "tokenizer/tiny_tokenizer_testing.h"

namespace zephon::tokenizer {
namespace {

constexpr const auto& kJson = kTinyLlama2Json;

std::string Replaced(std::string_view from, std::string_view to) {
  return absl::StrReplaceAll(kJson, {{absl::string_view(from.data(), from.size()),
                                      absl::string_view(to.data(), to.size())}});
}

std::unique_ptr<Tokenizer> Make(const std::string& json = kJson, TokenizerOptions options = {}) {
  auto tok = Tokenizer::FromJson(json, options);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? *std::move(tok) : nullptr;
}

std::string LoadError(const std::string& json) {
  auto tok = Tokenizer::FromJson(json);
  EXPECT_FALSE(tok.ok());
  return tok.ok() ? "" : std::string(tok.status().message());
}

using Ids = std::vector<int32_t>;

TEST(TokenizerTest, EncodesWithEachSpecialTokensMode) {
  auto tok = Make();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(*tok->Encode("a b"), (Ids{6, 3, 5}));  // "▁a▁b"
  EXPECT_EQ(*tok->Encode("a b", SpecialTokens::kTokenizerDefault), (Ids{1, 6, 3, 5}));
  EXPECT_EQ(*tok->Encode("a b", SpecialTokens::kBosEos), (Ids{1, 6, 3, 5, 2}));
  EXPECT_EQ(*tok->Encode("", SpecialTokens::kEos), (Ids{2}));
  EXPECT_EQ(*tok->Encode("", SpecialTokens::kNone), Ids{});
  EXPECT_EQ(tok->bos_token_id(), 1);
  EXPECT_EQ(tok->eos_token_id(), 2);
  EXPECT_EQ(tok->vocab_size(), 11);
}

TEST(TokenizerTest, SpecialTokensInTextAndSplitSpecialTokens) {
  auto tok = Make();
  // Each piece between special tokens is normalized on its own (Prepend per piece), as HF.
  EXPECT_EQ(*tok->Encode("a</s>b"), (Ids{6, 2, 3, 5}));
  TokenizerOptions split;
  split.split_special_tokens = true;
  auto plain = Make(kJson, split);
  const Ids ids = *plain->Encode("</s>");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 2), 0);
  EXPECT_NE(plain->fingerprint(), tok->fingerprint());
}

TEST(TokenizerTest, InvalidUtf8BecomesReplacementCharacter) {
  auto tok = Make();
  EXPECT_EQ(*tok->Encode("a\xff"), *tok->Encode("a\xef\xbf\xbd"));
  EXPECT_EQ(*tok->Encode("a\xff"), (Ids{6, 8, 9, 10}));  // U+FFFD by byte fallback
}

TEST(TokenizerTest, EncodeValidUtf8GivesEncodesIdsForValidText) {
  auto tok = Make();
  for (const std::string text : {"", "a b", "a</s>b", "ab ab a", "a\xef\xbf\xbd b"}) {
    for (SpecialTokens mode : {SpecialTokens::kNone, SpecialTokens::kBosEos,
                               SpecialTokens::kTokenizerDefault}) {
      Ids ids = {42};  // appends, as Encode does
      ASSERT_TRUE(tok->EncodeValidUtf8(text, mode, &ids).ok());
      Ids want = {42};
      ASSERT_TRUE(tok->Encode(text, mode, &want).ok());
      EXPECT_EQ(ids, want) << text;
    }
  }
}

TEST(TokenizerTest, DecodesLikeTheReference) {
  auto tok = Make();
  EXPECT_EQ(*tok->Decode(Ids{1, 6, 3, 5}), "<s> a b");
  EXPECT_EQ(*tok->Decode(*tok->Encode("a b ab")), "a b ab");
  auto bad = tok->Decode(Ids{99});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kOutOfRange);
}

TEST(TokenizerTest, ModesNeedingMissingTokensFailAtCheck) {
  auto tok = Make(Replaced(R"({"SpecialToken": {"id": "<s>", "type_id": 0}}, )", ""));
  ASSERT_NE(tok, nullptr);
  // "<s>" is still found by name; drop it from the names to see the error.
  auto none = Make(absl::StrReplaceAll(
      Replaced(R"({"SpecialToken": {"id": "<s>", "type_id": 0}}, )", ""),
      {{"\"<s>\"", "\"<S>\""}}));
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->bos_token_id(), std::nullopt);
  EXPECT_EQ(none->CheckSpecialTokens(SpecialTokens::kBos).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(none->Encode("a", SpecialTokens::kBosEos).status().code(),
            absl::StatusCode::kFailedPrecondition);
  Ids ids;
  EXPECT_EQ(none->EncodeValidUtf8("a", SpecialTokens::kBosEos, &ids).code(),
            absl::StatusCode::kFailedPrecondition);
  TokenizerOptions with_bos;
  with_bos.bos_token_id = 4;
  auto fixed = Tokenizer::FromJson(Replaced("\"<s>\"", "\"<S>\""), with_bos);
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ((*fixed)->Encode("a", SpecialTokens::kBos)->front(), 4);
}

TEST(TokenizerTest, FingerprintIgnoresFormattingButNotContent) {
  auto a = Make();
  auto b = Make(absl::StrReplaceAll(kJson, {{"\n", ""}, {"  ", " "}}));
  auto c = Make(Replaced(R"("merges": ["▁ a", "a b"])", R"("merges": ["a b", "▁ a"])"));
  ASSERT_NE(b, nullptr);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(a->fingerprint(), b->fingerprint());
  EXPECT_NE(a->fingerprint(), c->fingerprint());
  EXPECT_EQ(a->fingerprint().rfind("sha256:", 0), 0u);
}

TEST(TokenizerTest, RefusesUnsupportedComponentsNamingTheirJsonPath) {
  EXPECT_EQ(LoadError(Replaced(R"("pre_tokenizer": null)",
                               R"("pre_tokenizer": {"type": "Sequence", "pretokenizers": [
                                   {"type": "Metaspace", "replacement": "▁"},
                                   {"type": "Whitespace"}]})")),
            "tokenizer.json: pre_tokenizer.pretokenizers[1].type 'Whitespace' is not supported "
            "(supported: Split, ByteLevel, Metaspace, Sequence)");
  EXPECT_NE(LoadError(Replaced(R"("pre_tokenizer": null)",
                               R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\w+"},
                                   "behavior": "Isolated", "invert": false})"))
                .find("tokenizer.json: pre_tokenizer.pattern.Regex '\\w+' is not a supported regex"),
            std::string::npos);
  EXPECT_NE(LoadError(Replaced(R"({"type": "Prepend", "prepend": "▁"})", R"({"type": "Lowercase"})"))
                .find("tokenizer.json: normalizer.normalizers[0].type 'Lowercase' is not supported"),
            std::string::npos);
  EXPECT_NE(LoadError(Replaced(R"("type": "BPE")", R"("type": "Unigram")"))
                .find("tokenizer.json: model.type 'Unigram' is not supported"),
            std::string::npos);
  EXPECT_NE(LoadError(Replaced(R"("a b"])", R"("a c"])")).find("model.merges[1]"),
            std::string::npos);
  EXPECT_NE(LoadError(Replaced(R"({"type": "Fuse"})", R"({"type": "WordPiece"})"))
                .find("decoder.decoders[2].type 'WordPiece' is not supported"),
            std::string::npos);
  EXPECT_NE(LoadError("{not json").find("tokenizer.json: not valid JSON"), std::string::npos);
}

std::string WriteFile(const std::string& dir, const std::string& name, const std::string& body) {
  const std::string path = dir + "/" + name;
  std::ofstream(path) << body;
  return path;
}

TEST(TokenizerTest, LoadsFilesAndModelDirectories) {
  const std::string dir = testing::MakeTempDir("tok");
  EXPECT_EQ(Tokenizer::Load(dir + "/missing.json").status().code(), absl::StatusCode::kNotFound);
  auto empty_dir = Tokenizer::Load(dir);
  EXPECT_EQ(empty_dir.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(empty_dir.status().message().find("has no tokenizer.json"), std::string::npos);

  const std::string file = WriteFile(dir, "tokenizer.json", kJson);
  auto from_file = Tokenizer::Load(file);
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(*(*from_file)->Encode("ab"), (Ids{6, 5}));  // "▁ab": ▁+a outranks a+b

  WriteFile(dir, "tokenizer_config.json",
            R"({"bos_token": {"content": "</s>"}, "eos_token": "<unk>"})");
  auto from_dir = Tokenizer::Load(dir);
  ASSERT_TRUE(from_dir.ok()) << from_dir.status();
  EXPECT_EQ((*from_dir)->bos_token_id(), 2);
  EXPECT_EQ((*from_dir)->eos_token_id(), 0);

  WriteFile(dir, "tokenizer_config.json", R"({"eos_token": "<nope>"})");
  auto bad = Tokenizer::Load(dir);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tokenizer_config.json: eos_token '<nope>'"),
            std::string::npos);

  auto spm = Tokenizer::Load(WriteFile(dir, "broken.model", "not a model"));
  // INVALID_ARGUMENT (not FAILED_PRECONDITION): the shim loaded, libsentencepiece refused.
  EXPECT_EQ(spm.status().code(), absl::StatusCode::kInvalidArgument) << spm.status();
  EXPECT_NE(spm.status().message().find("SentencePiece model: cannot load it"),
            std::string::npos);
}

TEST(TokenizerTest, WellKnownNamesAreBosEosOnlyAsSpecialAddedTokens) {
  // No template and no config: "<s>" / "</s>" name BOS / EOS when they are special added
  // tokens, never when they are ordinary vocabulary entries (Qwen's vocabulary has both).
  const std::string no_template = Replaced(
      R"({"SpecialToken": {"id": "<s>", "type_id": 0}}, )", "");
  auto special = Make(no_template);
  ASSERT_NE(special, nullptr);
  EXPECT_EQ(special->bos_token_id(), std::optional<int32_t>(1));
  EXPECT_EQ(special->eos_token_id(), std::optional<int32_t>(2));
  const std::string ordinary = absl::StrReplaceAll(
      no_template, {{R"(    {"id": 1, "content": "<s>", "special": true, "normalized": false},
    {"id": 2, "content": "</s>", "special": true, "normalized": false}
)", ""},
                    {R"({"id": 0, "content": "<unk>", "special": true, "normalized": false},)",
                     R"({"id": 0, "content": "<unk>", "special": true, "normalized": false})"},
                    {R"("special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}})",
                     R"("special_tokens": {})"}});
  auto plain = Make(ordinary);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(plain->bos_token_id(), std::nullopt);
  EXPECT_EQ(plain->eos_token_id(), std::nullopt);
}

TEST(TokenizerTest, ConfigWithAHugeModelMaxLengthLoads) {
  // transformers saves model_max_length = int(1e30): a valid JSON number no int64 holds.
  auto tok = Tokenizer::FromJson(
      kJson, {},
      R"({"model_max_length": 1000000000000000019884624838656, "bos_token": null,)"
      R"( "eos_token": {"content": "</s>", "lstrip": false}, "extra": [1e400, {"x": 1}]})");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ((*tok)->eos_token_id(), std::optional<int32_t>(2));
  // bos_token null: not named by the config, so none (the template is not consulted).
  EXPECT_EQ((*tok)->bos_token_id(), std::nullopt);
  auto bad = Tokenizer::FromJson(kJson, {}, R"({"bos_token": 7})");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bos_token"), std::string::npos) << bad.status();
  EXPECT_FALSE(Tokenizer::FromJson(kJson, {}, "[1, 2]").ok());
}

TEST(TokenizerTest, ConcurrentEncodesAgree) {
  auto tok = Make();
  const Ids expected = *tok->Encode("ab a b ab ba");
  std::vector<std::thread> threads;
  std::vector<int> ok(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) ok[t] += *tok->Encode("ab a b ab ba") == expected;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(ok, (std::vector<int>{200, 200, 200, 200}));
}

// Documents of the tiny tokenizer's pieces whose cuts matter: merges ("▁" "a", "a" "b"),
// runs of spaces, characters outside the vocabulary (byte fallback, <unk>), added tokens.
std::vector<std::string> WindowEdgeTexts(int n, uint32_t seed) {
  const std::vector<std::string> pool = {"a", "b", "ab", " ", "  ", " a", "\u00e9", "\u65e5",
                                         "<s>", "</s>", "<unk>", "\xff", "e\u0301"};
  std::mt19937 rng(seed);
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) {
    std::string t;
    const int parts = static_cast<int>(rng() % 300);
    for (int k = 0; k < parts; ++k) t += pool[rng() % pool.size()];
    out.push_back(t);
  }
  return out;
}

TEST(TokenizerTest, SmallWindowsGiveTheWholeTextsIds) {
  // No pre-tokenizer: the normalized text is one word, which a window cuts only where no
  // merge can join across; with NFC added, normalization is chunked too.
  const std::string nfc = Replaced(R"({"type": "Prepend", "prepend": "▁"},)",
                                   R"({"type": "NFC"}, {"type": "Prepend", "prepend": "▁"},)");
  int checked = 0;
  for (const std::string& json : {std::string(kJson), nfc}) {
    auto whole = Make(json);
    for (size_t window : {1, 2, 3, 7, 50}) {
      TokenizerOptions options;
      options.window_for_testing = window;
      auto windowed = Make(json, options);
      for (const std::string& text : WindowEdgeTexts(200, 14 + window)) {
        ASSERT_EQ(*windowed->Encode(text), *whole->Encode(text))
            << "window " << window << " text '" << text << "'";
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 2000);
}

TEST(TokenizerTest, StretchesOverMaxUnsplitBytesAreRefusedNamingTheLimit) {
  TokenizerOptions options;
  options.window_for_testing = 16;
  options.max_unsplit_bytes = 64;
  auto tok = Make(kJson, options);
  // "é" is not in the vocabulary (byte fallback): a run of it has no place to cut.
  std::string run;
  for (int i = 0; i < 40; ++i) run += "\u00e9";
  auto refused = tok->Encode(run);
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.status().message().find("max_unsplit_bytes"), std::string::npos);
  // The same length with cuts ("b" then a space: no merge joins them) is encoded.
  std::string spaced;
  for (int i = 0; i < 40; ++i) spaced += "ab ";
  EXPECT_TRUE(tok->Encode(spaced).ok());
  // A normalizer that cannot be chunked (NFC after a Replace) holds a piece whole.
  auto whole_norm = Make(Replaced(R"({"type": "Replace", "pattern": {"String": " "}, "content": "▁"})",
                                  R"({"type": "Replace", "pattern": {"String": " "}, "content": "▁"}, {"type": "NFC"})"),
                         options);
  EXPECT_EQ(whole_norm->Encode(spaced).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(whole_norm->Encode("ab ab").ok());
}

TEST(TokenizerTest, ParsesSpecialTokensNames) {
  EXPECT_EQ(*ParseSpecialTokens("bos_eos"), SpecialTokens::kBosEos);
  EXPECT_EQ(*ParseSpecialTokens("tokenizer_default"), SpecialTokens::kTokenizerDefault);
  EXPECT_EQ(ParseSpecialTokens("both").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace zephon::tokenizer
