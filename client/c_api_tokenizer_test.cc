// The tokenizer half of the C ABI (c_api.h, "Tokenizer"): loading from a path
// and from JSON bytes, options, encode / encode_batch / decode, ownership of
// what comes back, and the error conventions. The exactness against HF
// tokenizers is tests/tokenize's.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "client/c_api.h"
#include "common/temp_dir_testing.h"
#include "tokenizer/tiny_tokenizer_testing.h"

namespace {

constexpr int kInvalidArgument = 3;
constexpr int kNotFound = 5;
constexpr int kFailedPrecondition = 9;
constexpr int kOutOfRange = 11;

constexpr const auto& kJson = zephon::tokenizer::kTinyLlama2Json;

using Ids = std::vector<int32_t>;

// The outcome of one C call: its code and message (the message freed here).
struct Result {
  int code;
  std::string message;
};

// `error` is read after the call (an argument evaluated before it would see
// NULL).
Result Take(int code, char** error) {
  Result r{code, *error != nullptr ? *error : ""};
  zephon_free(*error);
  *error = nullptr;
  return r;
}

zephon_tokenizer* FromJson(const std::string& json,
                           const zephon_tokenizer_options* options = nullptr) {
  zephon_tokenizer* tok = nullptr;
  char* error = nullptr;
  Result r =
      Take(zephon_tokenizer_from_json(json.data(), json.size(), nullptr, 0, options, &tok, &error),
           &error);
  EXPECT_EQ(r.code, 0) << r.message;
  return tok;
}

Ids Encode(const zephon_tokenizer* tok, const std::string& text, const char* mode = "none") {
  int32_t* ids = nullptr;
  uint64_t n = 0;
  char* error = nullptr;
  Result r =
      Take(zephon_tokenizer_encode(tok, text.data(), text.size(), mode, &ids, &n, &error), &error);
  EXPECT_EQ(r.code, 0) << r.message;
  Ids out(ids, ids + n);
  zephon_free_array(ids);
  return out;
}

std::string WriteFile(const std::string& dir, const std::string& name, const std::string& text) {
  const std::string path = dir + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

TEST(CApiTokenizerTest, EncodesDecodesAndReportsItsTokens) {
  zephon_tokenizer* tok = FromJson(kJson);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(Encode(tok, "a b"), (Ids{6, 3, 5}));
  EXPECT_EQ(Encode(tok, "a b", "tokenizer_default"), (Ids{1, 6, 3, 5}));
  EXPECT_EQ(Encode(tok, "a b", "bos_eos"), (Ids{1, 6, 3, 5, 2}));
  EXPECT_EQ(Encode(tok, "", "none"), Ids{});
  EXPECT_EQ(zephon_tokenizer_vocab_size(tok), 11);
  EXPECT_EQ(zephon_tokenizer_bos_token_id(tok), 1);
  EXPECT_EQ(zephon_tokenizer_eos_token_id(tok), 2);
  EXPECT_EQ(std::string(zephon_tokenizer_fingerprint(tok)).rfind("sha256:", 0), 0u);

  const Ids ids = {6, 3, 5};
  char* text = nullptr;
  uint64_t size = 0;
  char* error = nullptr;
  Result r =
      Take(zephon_tokenizer_decode(tok, ids.data(), ids.size(), &text, &size, &error), &error);
  ASSERT_EQ(r.code, 0) << r.message;
  EXPECT_EQ(std::string(text, size), "a b");
  zephon_free(text);
  zephon_tokenizer_free(tok);
}

TEST(CApiTokenizerTest, EncodeBatchKeepsInputOrder) {
  zephon_tokenizer* tok = FromJson(kJson);
  ASSERT_NE(tok, nullptr);
  std::vector<std::string> docs;
  for (int i = 0; i < 100; ++i)
    docs.push_back(std::string(i % 7, 'a') + " b" + std::string(i % 5, 'b'));
  std::vector<const char*> texts;
  std::vector<uint64_t> sizes;
  for (const std::string& d : docs) {
    texts.push_back(d.data());
    sizes.push_back(d.size());
  }
  int32_t* ids = nullptr;
  uint64_t* offsets = nullptr;
  char* error = nullptr;
  Result r = Take(zephon_tokenizer_encode_batch(tok, texts.data(), sizes.data(), docs.size(), "eos",
                                                2, &ids, &offsets, &error),
                  &error);
  ASSERT_EQ(r.code, 0) << r.message;
  for (size_t i = 0; i < docs.size(); ++i) {
    EXPECT_EQ(Ids(ids + offsets[i], ids + offsets[i + 1]), Encode(tok, docs[i], "eos")) << i;
  }
  zephon_free_array(ids);
  zephon_free_array(offsets);
  zephon_tokenizer_free(tok);
}

TEST(CApiTokenizerTest, OptionsOverrideBosEosAndSplitSpecialTokens) {
  zephon_tokenizer_options options = {sizeof(zephon_tokenizer_options), 1, 4, 5};
  zephon_tokenizer* tok = FromJson(kJson, &options);
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(zephon_tokenizer_bos_token_id(tok), 4);
  EXPECT_EQ(zephon_tokenizer_eos_token_id(tok), 5);
  zephon_tokenizer* plain = FromJson(kJson);
  EXPECT_NE(Encode(tok, "a</s>b"), Encode(plain, "a</s>b"));  // </s> is text here
  EXPECT_STRNE(zephon_tokenizer_fingerprint(tok), zephon_tokenizer_fingerprint(plain));
  zephon_tokenizer_free(tok);
  zephon_tokenizer_free(plain);

  options.struct_size = 8;  // an older caller's struct
  zephon_tokenizer* none = nullptr;
  char* error = nullptr;
  Result r = Take(
      zephon_tokenizer_from_json(kJson, sizeof(kJson) - 1, nullptr, 0, &options, &none, &error),
      &error);
  EXPECT_EQ(r.code, kInvalidArgument);
  EXPECT_NE(r.message.find("struct_size is 8"), std::string::npos) << r.message;
  EXPECT_EQ(none, nullptr);
}

TEST(CApiTokenizerTest, LoadsFromAFileAndADirectory) {
  const std::string dir = zephon::testing::MakeTempDir("c-api-tok");
  const std::string file = WriteFile(dir, "tokenizer.json", kJson);
  for (const std::string& path : {file, dir}) {
    zephon_tokenizer* tok = nullptr;
    char* error = nullptr;
    Result r = Take(zephon_tokenizer_load(path.c_str(), nullptr, &tok, &error), &error);
    ASSERT_EQ(r.code, 0) << path << ": " << r.message;
    EXPECT_EQ(Encode(tok, "ab"), (Ids{6, 5}));
    zephon_tokenizer_free(tok);
  }
}

TEST(CApiTokenizerTest, ErrorsNameThePathTheJsonPathAndTheValidModes) {
  const std::string dir = zephon::testing::MakeTempDir("c-api-tok-errors");
  zephon_tokenizer* tok = nullptr;
  char* error = nullptr;
  const std::string missing = dir + "/nope.json";
  Result r = Take(zephon_tokenizer_load(missing.c_str(), nullptr, &tok, &error), &error);
  EXPECT_EQ(r.code, kNotFound);
  EXPECT_NE(r.message.find(missing), std::string::npos) << r.message;

  std::string bad = kJson;
  bad.replace(bad.find("\"BPE\""), 5, "\"Unigram\"");
  const std::string bad_path = WriteFile(dir, "bad.json", bad);
  r = Take(zephon_tokenizer_load(bad_path.c_str(), nullptr, &tok, &error), &error);
  EXPECT_EQ(r.code, kInvalidArgument);
  EXPECT_NE(r.message.find(bad_path), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("model"), std::string::npos) << r.message;

  r = Take(zephon_tokenizer_load("s3://bucket/llama3/tokenizer.json", nullptr, &tok, &error),
           &error);
  EXPECT_EQ(r.code, kInvalidArgument);
  EXPECT_NE(r.message.find("download the tokenizer first"), std::string::npos) << r.message;
  EXPECT_EQ(tok, nullptr);

  // .model files load (libsentencepiece sits in its own link namespace, apart from
  // gRPC's protobuf); a broken one is INVALID_ARGUMENT naming the file.
  const std::string model = WriteFile(dir, "spm.model", "not a model");
  r = Take(zephon_tokenizer_load(model.c_str(), nullptr, &tok, &error), &error);
  EXPECT_EQ(r.code, kInvalidArgument);
  EXPECT_NE(r.message.find(model), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("SentencePiece model: cannot load it"), std::string::npos)
      << r.message;
  EXPECT_EQ(tok, nullptr);

  tok = FromJson(kJson);
  int32_t* ids = nullptr;
  uint64_t n = 0;
  r = Take(zephon_tokenizer_encode(tok, "a", 1, "bos_and_eos", &ids, &n, &error), &error);
  EXPECT_EQ(r.code, kInvalidArgument);
  EXPECT_NE(r.message.find("none, bos, eos, bos_eos, tokenizer_default"), std::string::npos)
      << r.message;

  const int32_t out_of_range[] = {6, 99};
  char* text = nullptr;
  uint64_t size = 0;
  r = Take(zephon_tokenizer_decode(tok, out_of_range, 2, &text, &size, &error), &error);
  EXPECT_EQ(r.code, kOutOfRange);
  EXPECT_NE(r.message.find("99"), std::string::npos) << r.message;
  zephon_tokenizer_free(tok);
}

TEST(CApiTokenizerTest, MissingEosIsAFailedPrecondition) {
  std::string json = kJson;  // </s> renamed: no EOS by name or by the template
  for (size_t at; (at = json.find("</s>")) != std::string::npos;) json.replace(at, 4, "[x]");
  zephon_tokenizer* tok = FromJson(json);
  ASSERT_NE(tok, nullptr);
  ASSERT_EQ(zephon_tokenizer_eos_token_id(tok), -1);
  int32_t* ids = nullptr;
  uint64_t n = 0;
  char* error = nullptr;
  Result r = Take(zephon_tokenizer_encode(tok, "a", 1, "eos", &ids, &n, &error), &error);
  EXPECT_EQ(r.code, kFailedPrecondition);
  EXPECT_NE(r.message.find("eos_token_id"), std::string::npos) << r.message;
  zephon_tokenizer_free(tok);
}

}  // namespace
