// Loss masks in the formats layer: building a mask from values or spans (loss_mask.h),
// the token cache's .msk companion of JSONL token-array shards (jsonl_reader.h), and
// prompt/completion text records masked per field (text_convert.h).
#include "daemon/pipeline/formats/loss_mask.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "daemon/pipeline/formats/jsonl_reader.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/formats/text_convert.h"
#include "tokenizer/tiny_tokenizer_testing.h"
#include "tokenizer/tokenizer.h"

namespace zephon::pipeline {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::WriteTextFile;
using tokenizer::SpecialTokens;
using Mask = std::vector<uint8_t>;

TEST(LossMaskTest, ValuesMustMatchTheTokenCountAndBeZeroOrOne) {
  Mask mask;
  ASSERT_TRUE(MaskFromValues({0, 1, 1, 0}, 4, &mask).ok());
  EXPECT_EQ(mask, (Mask{0, 1, 1, 0}));
  const absl::Status length = MaskFromValues({0, 1, 1}, 4, &mask);
  EXPECT_EQ(length.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(length.message().find("3 values"), std::string::npos) << length;
  EXPECT_NE(length.message().find("4 tokens"), std::string::npos) << length;
  const absl::Status value = MaskFromValues({0, 2}, 2, &mask);
  EXPECT_NE(value.message().find("value 1 is 2"), std::string::npos) << value;
}

TEST(LossMaskTest, SpansMarkTheTrainedRangesAndRefuseOutOfRangePairs) {
  Mask mask;
  ASSERT_TRUE(MaskFromSpans({1, 3, 5, 6, 2, 3}, 7, &mask).ok());
  EXPECT_EQ(mask, (Mask{0, 1, 1, 0, 0, 1, 0}));
  ASSERT_TRUE(MaskFromSpans({}, 3, &mask).ok());
  EXPECT_EQ(mask, (Mask{0, 0, 0}));
  EXPECT_NE(MaskFromSpans({0, 8}, 7, &mask).message().find("span 0 [0, 8)"),
            std::string::npos);
  EXPECT_NE(MaskFromSpans({3, 2}, 7, &mask).message().find("span 0 [3, 2)"),
            std::string::npos);
  EXPECT_NE(MaskFromSpans({1, 2, 3}, 7, &mask).message().find("3 numbers"), std::string::npos);
}

TEST(LossMaskTest, ScannerReadsValuesBooleansAndSpanPairs) {
  LossMaskScanner values(LossMaskSource{"m", LossMaskFormat::kValues});
  Mask mask;
  ASSERT_TRUE(values.Scan(R"({"ids":[1,2,3],"m":[1,false,true]})", 3, &mask).ok());
  EXPECT_EQ(mask, (Mask{1, 0, 1}));
  EXPECT_NE(values.Scan(R"({"ids":[1,2,3]})", 3, &mask).message().find("\"m\" is missing"),
            std::string::npos);
  EXPECT_NE(values.Scan(R"({"m":"abc"})", 3, &mask).message().find("not a list"),
            std::string::npos);
  EXPECT_NE(values.Scan(R"({"m":[1,0.5,1]})", 3, &mask).message().find("element 1"),
            std::string::npos);
  LossMaskScanner spans(LossMaskSource{"m", LossMaskFormat::kSpans});
  ASSERT_TRUE(spans.Scan(R"({"m":[[0,1],[3,5]]})", 5, &mask).ok());
  EXPECT_EQ(mask, (Mask{1, 0, 0, 1, 1}));
  EXPECT_NE(spans.Scan(R"({"m":[[0,1,2]]})", 5, &mask).message().find("element 0"),
            std::string::npos);
}

class MaskedJsonlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("loss_mask_test");
    cache_ = dir_ + "/cache";
  }
  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    EXPECT_TRUE(WriteTextFile(path, content).ok());
    return path;
  }
  absl::StatusOr<std::unique_ptr<JsonlShard>> Open(const std::string& path,
                                                   LossMaskSource mask) {
    JsonlShardOptions options;
    options.field = "ids";
    options.cache_dir = cache_;
    options.loss_mask = std::move(mask);
    return JsonlShard::Open(path, options);
  }
  static Mask MaskOf(const ShardReader& shard, uint64_t i, uint64_t offset, uint64_t count) {
    Mask out(count, 7);
    EXPECT_TRUE(shard.CopyLossMask(i, offset, count, out.data()).ok());
    return out;
  }
  std::string dir_, cache_;
};

TEST_F(MaskedJsonlTest, ValuesAndSpansLandInACompanionFileBesideTheTokens) {
  const std::string path = Write("a.jsonl",
                                 "{\"ids\":[5,6,7,8],\"m\":[0,0,1,1],\"s\":[[2,4]]}\n"
                                 "{\"ids\":[9],\"m\":[1],\"s\":[[0,1]]}\n");
  auto values = Open(path, {"m", LossMaskFormat::kValues});
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_TRUE((*values)->HasLossMask());
  EXPECT_TRUE(fs::exists((*values)->cache_prefix() + ".msk"));
  EXPECT_EQ(fs::file_size((*values)->cache_prefix() + ".msk"), 5u);  // one byte a token
  EXPECT_EQ(MaskOf(**values, 0, 0, 4), (Mask{0, 0, 1, 1}));
  EXPECT_EQ(MaskOf(**values, 0, 1, 2), (Mask{0, 1}));
  EXPECT_EQ(MaskOf(**values, 1, 0, 1), (Mask{1}));
  auto spans = Open(path, {"s", LossMaskFormat::kSpans});
  ASSERT_TRUE(spans.ok()) << spans.status();
  EXPECT_EQ(MaskOf(**spans, 0, 0, 4), (Mask{0, 0, 1, 1}));
  // Warm: the same cache opens again with its mask.
  auto again = Open(path, {"m", LossMaskFormat::kValues});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->cache_prefix(), (*values)->cache_prefix());
  EXPECT_EQ(MaskOf(**again, 0, 0, 4), (Mask{0, 0, 1, 1}));
}

TEST_F(MaskedJsonlTest, UnmaskedCachesKeepTheirKeyAndNeverMeetAMaskedOne) {
  const std::string path = Write("b.jsonl", "{\"ids\":[1,2],\"m\":[0,1]}\n");
  auto plain = Open(path, {});
  auto masked = Open(path, {"m", LossMaskFormat::kValues});
  auto spans = Open(path, {"m", LossMaskFormat::kSpans});  // [0, 1) as a flat pair
  ASSERT_TRUE(plain.ok() && masked.ok() && spans.ok());
  EXPECT_FALSE((*plain)->HasLossMask());
  EXPECT_FALSE(fs::exists((*plain)->cache_prefix() + ".msk"));
  EXPECT_EQ(MaskOf(**plain, 0, 0, 2), (Mask{1, 1}));
  EXPECT_NE((*plain)->cache_prefix(), (*masked)->cache_prefix());
  EXPECT_NE((*masked)->cache_prefix(), (*spans)->cache_prefix());
  EXPECT_EQ(MaskOf(**spans, 0, 0, 2), (Mask{1, 0}));
  // The unmasked key is the one earlier releases used (jsonl_reader.h).
  auto legacy = JsonlShard::Open(path, "ids", cache_);
  ASSERT_TRUE(legacy.ok());
  EXPECT_EQ((*legacy)->cache_prefix(), (*plain)->cache_prefix());
}

TEST_F(MaskedJsonlTest, LengthMismatchNamesFileLineAndBothLengths) {
  const std::string path = Write("c.jsonl",
                                 "{\"ids\":[1,2],\"m\":[0,1]}\n"
                                 "{\"ids\":[1,2,3],\"m\":[0,1]}\n");
  auto shard = Open(path, {"m", LossMaskFormat::kValues});
  ASSERT_FALSE(shard.ok());
  EXPECT_EQ(shard.status().code(), absl::StatusCode::kDataLoss);
  const std::string msg(shard.status().message());
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("2 values"), std::string::npos) << msg;
  EXPECT_NE(msg.find("3 tokens"), std::string::npos) << msg;
  // Nothing was committed.
  for (const auto& entry : fs::directory_iterator(cache_)) {
    EXPECT_NE(entry.path().extension(), ".off") << entry.path();
  }
}

std::shared_ptr<const tokenizer::Tokenizer> Tiny() {
  auto tok = tokenizer::Tokenizer::FromJson(tokenizer::kTinyLlama2Json, {});
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::shared_ptr<const tokenizer::Tokenizer>(*std::move(tok));
}

std::vector<int32_t> Encode(std::string_view text, SpecialTokens mode) {
  auto ids = Tiny()->Encode(text, mode);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return *ids;
}

// prompt (masked) + completion (trained), special tokens per `mode`.
TextTokenization PromptCompletion(SpecialTokens mode) {
  TextTokenization text;
  text.tokenizer = Tiny();
  text.special_tokens = mode;
  text.fields = {"prompt", "completion"};
  text.field = "prompt";
  text.loss_on = {false, true};
  return text;
}

absl::StatusOr<std::unique_ptr<JsonlShard>> OpenText(const std::string& path,
                                                     const std::string& cache,
                                                     const TextTokenization& text) {
  JsonlShardOptions options;
  options.cache_dir = cache;
  options.text = &text;
  return JsonlShard::Open(path, options);
}

// BOS + the prompt's ids, then the completion's + EOS; *prompt = the masked count.
std::vector<int32_t> Concatenated(std::string_view prompt, std::string_view completion,
                                  size_t* prompt_tokens) {
  std::vector<int32_t> all = Encode(prompt, SpecialTokens::kBos);
  *prompt_tokens = all.size();
  const std::vector<int32_t> tail = Encode(completion, SpecialTokens::kEos);
  all.insert(all.end(), tail.begin(), tail.end());
  return all;
}

TEST_F(MaskedJsonlTest, PromptCompletionConcatenatesFieldsAndMasksThePrompt) {
  const std::string path =
      Write("pc.jsonl", "{\"prompt\":\"hello world\",\"completion\":\"hi there\"}\n"
                        "{\"completion\":\"a\",\"prompt\":\"b c\"}\n");
  TextTokenization text = PromptCompletion(SpecialTokens::kBosEos);
  auto shard = OpenText(path, cache_, text);
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_EQ((*shard)->NumSamples(), 2u);
  const std::vector<std::pair<std::string, std::string>> records = {
      {"hello world", "hi there"}, {"b c", "a"}};
  for (uint64_t i = 0; i < 2; ++i) {
    size_t prompt = 0;
    const std::vector<int32_t> want = Concatenated(records[i].first, records[i].second, &prompt);
    std::vector<int32_t> got;
    ASSERT_TRUE((*shard)->AppendTokens(i, 0, (*shard)->SampleLength(i), &got).ok());
    EXPECT_EQ(got, want) << "record " << i;
    Mask expect(got.size(), 1);
    std::fill(expect.begin(), expect.begin() + prompt, 0);
    EXPECT_EQ(MaskOf(**shard, i, 0, got.size()), expect) << "record " << i;
  }
  size_t prompt = 0;
  const std::vector<int32_t> all = Concatenated("hello world", "hi there", &prompt);
  // split_long_samples: each child carries its piece of the mask.
  text.max_length = 3;
  text.long_samples = TextTokenization::LongSamples::kSplit;
  auto split = OpenText(path, cache_, text);
  ASSERT_TRUE(split.ok()) << split.status();
  uint64_t at = 0;
  for (uint64_t i = 0; at < all.size(); ++i) {
    const uint64_t n = (*split)->SampleLength(i);
    const Mask mask = MaskOf(**split, i, 0, n);
    for (uint64_t k = 0; k < n; ++k) EXPECT_EQ(mask[k], at + k >= prompt ? 1 : 0);
    at += n;
  }
  EXPECT_EQ(at, all.size());
  // truncation: the mask is cut with the tokens.
  text.max_length = prompt + 1;
  text.long_samples = TextTokenization::LongSamples::kTruncate;
  auto cut = OpenText(path, cache_, text);
  ASSERT_TRUE(cut.ok()) << cut.status();
  ASSERT_EQ((*cut)->SampleLength(0), prompt + 1);
  Mask expect(prompt + 1, 0);
  expect.back() = 1;
  EXPECT_EQ(MaskOf(**cut, 0, 0, prompt + 1), expect);
}

TEST_F(MaskedJsonlTest, PromptCompletionMissingFieldNamesIt) {
  const std::string path = Write("m.jsonl", "{\"prompt\":\"x\"}\n");
  TextTokenization text = PromptCompletion(SpecialTokens::kNone);
  auto shard = OpenText(path, cache_, text);
  ASSERT_FALSE(shard.ok());
  EXPECT_NE(shard.status().message().find("\"completion\" is missing"), std::string::npos)
      << shard.status();
  text.skip_missing = true;
  auto skipped = OpenText(path, cache_, text);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ((*skipped)->NumSamples(), 0u);
  EXPECT_EQ((*skipped)->text_stats()->skipped_missing, 1u);
}

}  // namespace
}  // namespace zephon::pipeline
