// Record conversion (record_convert.h) over an in-memory RecordSource: text and token
// records, nulls skipped or refused, NumRecords mismatches, progress counters, and the
// same cache bytes as the JSONL text conversion of the same texts.
#include "daemon/pipeline/formats/record_convert.h"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/pipeline/formats/conversion_progress.h"
#include "daemon/pipeline/formats/jsonl_reader.h"
#include "daemon/pipeline/formats/test_pool_testing.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/formats/token_cache_files.h"
#include "daemon/pipeline/formats/tokens.h"
#include "tokenizer/tiny_tokenizer_testing.h"
#include "tokenizer/tokenizer.h"

namespace zephon::pipeline {
namespace {

using testing::MakeTempDir;
using testing::TestPool;
using testing::WriteTextFile;
using Ids = std::vector<int32_t>;
using Record = std::variant<std::monostate, std::string, Ids>;  // monostate: null

// A RecordSource over records held in memory.
class MemorySource final : public RecordSource {
 public:
  MemorySource(std::vector<Record> records, std::optional<uint64_t> declared)
      : records_(std::move(records)), declared_(declared) {}

  absl::StatusOr<bool> Next(Value* value) override {
    if (next_ >= records_.size()) return false;
    const Record& r = records_[next_++];
    *value = Value();
    if (const auto* text = std::get_if<std::string>(&r)) {
      value->kind = Value::Kind::kText;
      value->text = *text;
    } else if (const auto* ids = std::get_if<Ids>(&r)) {
      value->kind = Value::Kind::kTokens;
      value->tokens = *ids;
    }
    return true;
  }
  std::optional<uint64_t> NumRecords() const override { return declared_; }
  std::string Where() const override { return absl::StrCat("mem.src record ", next_ - 1); }

 private:
  const std::vector<Record> records_;
  const std::optional<uint64_t> declared_;
  size_t next_ = 0;
};

std::shared_ptr<const tokenizer::Tokenizer> Tiny() {
  auto tok = tokenizer::Tokenizer::FromJson(tokenizer::kTinyLlama2Json, {});
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::shared_ptr<const tokenizer::Tokenizer>(*std::move(tok));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class RecordConvertTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("record_convert_test");
    text_.tokenizer = Tiny();
    text_.special_tokens = tokenizer::SpecialTokens::kNone;
  }

  // Converts `records` into a cache at <dir>/<name> and returns its samples.
  absl::StatusOr<std::vector<Ids>> Convert(const std::string& name, std::vector<Record> records,
                                           std::optional<uint64_t> declared,
                                           const RecordConvertOptions& options,
                                           TextShardStats* stats) {
    MemorySource source(std::move(records), declared);
    const std::string prefix = dir_ + "/" + name;
    CacheWriter writer(prefix);
    if (absl::Status s = writer.Create(); !s.ok()) return s;
    if (absl::Status s = ConvertRecords(&source, "mem.src", options, &writer, stats); !s.ok()) {
      return s;
    }
    if (absl::Status s = writer.Commit(); !s.ok()) return s;
    CachePair cache = TryOpenCache(prefix);
    if (cache.tok == nullptr) return absl::InternalError("no cache");
    std::vector<Ids> out;
    for (size_t i = 0; i + 1 < cache.off->size() / 8; ++i) {
      const uint64_t a = LoadU64(cache.off->data() + 8 * i);
      const uint64_t b = LoadU64(cache.off->data() + 8 * (i + 1));
      Ids ids(b - a);
      absl::Status read = DecodeTokensAt(*cache.tok, 4 * a, TokenType::kInt32, b - a, ids.data());
      if (!read.ok()) return read;
      out.push_back(ids);
    }
    return out;
  }

  std::string dir_;
  TextTokenization text_;
};

TEST_F(RecordConvertTest, TokenRecordsAreWrittenAsTheyComeAndNullsSkippedAndCounted) {
  RecordConvertOptions options;
  TextShardStats stats;
  auto samples = Convert("tokens", {Ids{1, 2, 3}, std::monostate(), Ids{}, Ids{7}}, 4, options,
                         &stats);
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(*samples, (std::vector<Ids>{{1, 2, 3}, {}, {7}}));
  EXPECT_EQ(stats.records, 4u);
  EXPECT_EQ(stats.null_records, 1u);
  EXPECT_EQ(stats.samples, 3u);
  EXPECT_EQ(stats.tokens, 4u);
  EXPECT_EQ(stats.tokenized_bytes, 16u);
}

TEST_F(RecordConvertTest, TextRecordsAreTokenizedInOrderOnThePool) {
  TestPool pool(2);
  RecordConvertOptions options;
  options.text = &text_;
  options.convert.submit = [&](std::function<void()> t) { return pool.Submit(std::move(t)); };
  options.convert.block_bytes = 16;  // many blocks
  options.convert.max_blocks_in_flight = 3;
  std::vector<Record> records;
  std::vector<Ids> want;
  for (int i = 0; i < 60; ++i) {
    if (i % 7 == 3) {
      records.emplace_back(std::monostate());
      continue;
    }
    const std::string text = absl::StrCat("hello world number ", i, i % 2 ? " and more" : "");
    records.emplace_back(text);
    want.push_back(*text_.tokenizer->Encode(text, tokenizer::SpecialTokens::kNone));
  }
  TextShardStats stats;
  auto samples = Convert("text", records, records.size(), options, &stats);
  ASSERT_TRUE(samples.ok()) << samples.status();
  EXPECT_EQ(*samples, want);
  EXPECT_EQ(stats.records, 60u);
  EXPECT_EQ(stats.null_records, 9u);
  EXPECT_EQ(stats.samples, want.size());
  EXPECT_GT(pool.submitted(), 5);
}

TEST_F(RecordConvertTest, TextRecordsSplitAndReplaceInvalidUtf8LikeJsonl) {
  RecordConvertOptions options;
  options.text = &text_;
  text_.long_samples = TextTokenization::LongSamples::kSplit;
  text_.max_length = 2;
  TextShardStats stats;
  auto samples = Convert("split", {std::string("hello world hello"), std::string("a\xff" "b")},
                         std::nullopt, options, &stats);
  ASSERT_TRUE(samples.ok()) << samples.status();
  const Ids first = *text_.tokenizer->Encode("hello world hello", tokenizer::SpecialTokens::kNone);
  ASSERT_GT(first.size(), 2u);
  EXPECT_EQ((*samples)[0], Ids(first.begin(), first.begin() + 2));
  EXPECT_EQ(stats.split_records, 2u - (first.size() <= 2));
  EXPECT_EQ(stats.invalid_utf8_records, 1u);
  Ids all;
  for (const Ids& s : *samples) all.insert(all.end(), s.begin(), s.end());
  Ids expected = first;
  const Ids second = *text_.tokenizer->Encode("a\xEF\xBF\xBD" "b", tokenizer::SpecialTokens::kNone);
  expected.insert(expected.end(), second.begin(), second.end());
  EXPECT_EQ(all, expected);
}

TEST_F(RecordConvertTest, NullWithOnNullErrorNamesWhere) {
  RecordConvertOptions options;
  options.on_null = OnNull::kError;
  TextShardStats stats;
  auto samples = Convert("null", {Ids{1}, std::monostate()}, 2, options, &stats);
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(samples.status().message().find("mem.src record 1"), std::string::npos)
      << samples.status();
  EXPECT_NE(samples.status().message().find("on_null=\"skip\""), std::string::npos);
}

TEST_F(RecordConvertTest, NumRecordsThatDisagreesIsDataLoss) {
  RecordConvertOptions options;
  TextShardStats stats;
  auto fewer = Convert("fewer", {Ids{1}, Ids{2}}, 3, options, &stats);
  ASSERT_FALSE(fewer.ok());
  EXPECT_EQ(fewer.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(fewer.status().message().find("mem.src: holds 2 records where its metadata "
                                          "declares 3"),
            std::string::npos)
      << fewer.status();
  auto more = Convert("more", {Ids{1}, Ids{2}}, 1, options, &stats);
  ASSERT_FALSE(more.ok());
  EXPECT_EQ(more.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(more.status().message().find("more records than the 1"), std::string::npos)
      << more.status();
}

TEST_F(RecordConvertTest, AValueOfTheOtherKindIsInternalNamingWhere) {
  RecordConvertOptions options;
  TextShardStats stats;
  auto samples = Convert("kind", {std::string("text")}, 1, options, &stats);
  ASSERT_FALSE(samples.ok());
  EXPECT_EQ(samples.status().code(), absl::StatusCode::kInternal);
  EXPECT_NE(samples.status().message().find("mem.src record 0"), std::string::npos);
}

TEST_F(RecordConvertTest, ProgressCountsTheConversionAndItsBytes) {
  ConversionProgress progress;
  RecordConvertOptions options;
  options.text = &text_;
  options.convert.progress = &progress;
  TextShardStats stats;
  ASSERT_TRUE(Convert("p1", {std::string("hello"), std::string("world!")}, 2, options, &stats).ok());
  EXPECT_EQ(progress.Get().text_bytes, 11u);
  EXPECT_EQ(progress.Get().files_done, 1u);
  EXPECT_EQ(progress.Get().active, 0u);
  options.text = nullptr;
  ASSERT_TRUE(Convert("p2", {Ids{1, 2}}, 1, options, &stats).ok());
  EXPECT_EQ(progress.Get().text_bytes, 19u);
  // A failed conversion ends too.
  ASSERT_FALSE(Convert("p3", {Ids{1, 2}}, 5, options, &stats).ok());
  EXPECT_EQ(progress.Get().files_done, 3u);
  EXPECT_EQ(progress.Get().active, 0u);
}

// The same texts as JSONL lines and as records: byte-identical .tok / .off.
TEST_F(RecordConvertTest, SameCacheBytesAsTheJsonlTextConversion) {
  std::string jsonl;
  std::vector<Record> records;
  for (int i = 0; i < 40; ++i) {
    const std::string text = absl::StrCat("record ", i, " says hello world");
    absl::StrAppend(&jsonl, "{\"text\": \"", text, "\"}\n");
    records.emplace_back(text);
  }
  const std::string path = dir_ + "/same.jsonl";
  ASSERT_TRUE(WriteTextFile(path, jsonl).ok());
  JsonlShardOptions jo;
  jo.cache_dir = dir_ + "/jsonl_cache";
  jo.text = &text_;
  jo.convert.block_bytes = 64;
  auto shard = JsonlShard::Open(path, jo);
  ASSERT_TRUE(shard.ok()) << shard.status();
  RecordConvertOptions options;
  options.text = &text_;
  options.convert.block_bytes = 100;  // the block size never changes the output
  TextShardStats stats;
  ASSERT_TRUE(Convert("same", records, 40, options, &stats).ok());
  EXPECT_EQ(ReadFile(dir_ + "/same.tok"), ReadFile((*shard)->cache_prefix() + ".tok"));
  EXPECT_EQ(ReadFile(dir_ + "/same.off"), ReadFile((*shard)->cache_prefix() + ".off"));
  EXPECT_TRUE(stats.SameCounts(*(*shard)->text_stats()));
}

// Prompt/completion over two columns (tokenize fields): the same cache bytes, masks
// included, as the JSONL conversion of records holding both fields.
TEST_F(RecordConvertTest, PromptCompletionColumnsMatchTheJsonlConversion) {
  text_.fields = {"prompt", "completion"};
  text_.field = "prompt";
  text_.loss_on = {false, true};
  text_.special_tokens = tokenizer::SpecialTokens::kBosEos;
  std::string jsonl;
  std::vector<Record> prompts, completions;
  for (int i = 0; i < 30; ++i) {
    const std::string prompt = absl::StrCat("question ", i, " asks");
    const std::string completion = absl::StrCat("answer ", i * 7, " tells");
    absl::StrAppend(&jsonl, "{\"prompt\": \"", prompt, "\", \"completion\": \"", completion,
                    "\"}\n");
    prompts.emplace_back(prompt);
    completions.emplace_back(completion);
  }
  const std::string path = dir_ + "/pc.jsonl";
  ASSERT_TRUE(WriteTextFile(path, jsonl).ok());
  JsonlShardOptions jo;
  jo.cache_dir = dir_ + "/pc_jsonl_cache";
  jo.text = &text_;
  auto shard = JsonlShard::Open(path, jo);
  ASSERT_TRUE(shard.ok()) << shard.status();

  MemorySource prompt_source(prompts, 30), completion_source(completions, 30);
  RecordConvertOptions options;
  options.text = &text_;
  options.convert.block_bytes = 90;
  options.parts = {&completion_source};
  const std::string prefix = dir_ + "/pc";
  CacheWriter writer(prefix, /*with_mask=*/true);
  ASSERT_TRUE(writer.Create().ok());
  TextShardStats stats;
  const absl::Status converted =
      ConvertRecords(&prompt_source, "mem.src", options, &writer, &stats);
  ASSERT_TRUE(converted.ok()) << converted;
  ASSERT_TRUE(writer.Commit().ok());
  for (const char* suffix : {".tok", ".off", ".msk"}) {
    EXPECT_EQ(ReadFile(prefix + suffix), ReadFile((*shard)->cache_prefix() + suffix)) << suffix;
  }
  EXPECT_EQ(stats.samples, 30u);
  EXPECT_EQ(stats.tokens, (*shard)->text_stats()->tokens);
  // Prompts are masked, so the mask holds both values.
  const std::string mask = ReadFile(prefix + ".msk");
  EXPECT_NE(mask.find('\0'), std::string::npos);
  EXPECT_NE(mask.find('\1'), std::string::npos);
}

TEST_F(RecordConvertTest, ANullPartNullsTheRecordAndAShortPartIsDataLoss) {
  text_.fields = {"prompt", "completion"};
  text_.field = "prompt";
  text_.loss_on = {false, true};
  const std::vector<Record> prompts = {std::string("a b"), std::string("c d"),
                                       std::string("e f")};
  {
    MemorySource prompt_source(prompts, 3);
    MemorySource completion_source({std::string("x"), std::monostate(), std::string("z")}, 3);
    RecordConvertOptions options;
    options.text = &text_;
    options.parts = {&completion_source};
    CacheWriter writer(dir_ + "/nullpart", true);
    ASSERT_TRUE(writer.Create().ok());
    TextShardStats stats;
    ASSERT_TRUE(ConvertRecords(&prompt_source, "mem.src", options, &writer, &stats).ok());
    EXPECT_EQ(stats.null_records, 1u);
    EXPECT_EQ(stats.samples, 2u);
  }
  {
    MemorySource prompt_source(prompts, 3);
    MemorySource completion_source({std::string("x"), std::monostate(), std::string("z")}, 3);
    RecordConvertOptions options;
    options.text = &text_;
    options.on_null = OnNull::kError;
    options.parts = {&completion_source};
    CacheWriter writer(dir_ + "/nullerror", true);
    ASSERT_TRUE(writer.Create().ok());
    TextShardStats stats;
    const absl::Status s = ConvertRecords(&prompt_source, "mem.src", options, &writer, &stats);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("mem.src record 1: field 'completion' is null"),
              std::string::npos)
        << s;
  }
  {
    MemorySource prompt_source(prompts, 3);
    MemorySource completion_source({std::string("x")}, std::nullopt);
    RecordConvertOptions options;
    options.text = &text_;
    options.parts = {&completion_source};
    CacheWriter writer(dir_ + "/short", true);
    ASSERT_TRUE(writer.Create().ok());
    TextShardStats stats;
    const absl::Status s = ConvertRecords(&prompt_source, "mem.src", options, &writer, &stats);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_NE(s.message().find("tokenize field 2 ('completion') ends before the first "
                               "(record 1)"),
              std::string::npos)
        << s;
  }
}

TEST_F(RecordConvertTest, PartsWithoutMatchingTokenizeFieldsAreRefused) {
  MemorySource prompts({std::string("a")}, 1), extra({std::string("b")}, 1);
  RecordConvertOptions options;
  options.text = &text_;  // one field (no `fields`), but a part source
  options.parts = {&extra};
  CacheWriter writer(dir_ + "/parts_refused");
  ASSERT_TRUE(writer.Create().ok());
  TextShardStats stats;
  const absl::Status s = ConvertRecords(&prompts, "mem.src", options, &writer, &stats);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("1 part sources need text with 2 tokenize fields"),
            std::string::npos)
      << s;
}

TEST(TextStatsTest, NullFreeStatsKeepTheV1BytesAndV2RoundTrips) {
  TextShardStats stats;
  stats.records = 5;
  stats.tokens = 9;
  const std::string v1 = EncodeTextStats(stats);
  EXPECT_EQ(v1.size(), 21u + 7 * 8);
  EXPECT_EQ(v1.substr(0, 21), std::string("zephon-text-stats-v1\0", 21));
  stats.null_records = 3;
  const std::string v2 = EncodeTextStats(stats);
  EXPECT_EQ(v2.size(), 21u + 8 * 8);
  TextShardStats back;
  ASSERT_TRUE(DecodeTextStats(v2, &back));
  EXPECT_EQ(back.null_records, 3u);
  EXPECT_TRUE(back.SameCounts(stats));
  ASSERT_TRUE(DecodeTextStats(v1, &back));
  EXPECT_EQ(back.null_records, 0u);
  EXPECT_EQ(back.records, 5u);
  EXPECT_FALSE(DecodeTextStats(v2.substr(0, v2.size() - 8), &back));
  EXPECT_FALSE(DecodeTextStats(v1 + "x", &back));
}

TEST(OnNullTest, NamesParseAndABadOneIsRefused) {
  EXPECT_EQ(*ParseOnNull("skip"), OnNull::kSkip);
  EXPECT_EQ(*ParseOnNull("error"), OnNull::kError);
  EXPECT_EQ(OnNullName(OnNull::kError), "error");
  EXPECT_FALSE(ParseOnNull("drop").ok());
}

}  // namespace
}  // namespace zephon::pipeline
