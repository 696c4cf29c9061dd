// RecordShard (record_shard.h) and the shared CachedShard machinery: a record source is
// converted once into the token cache, a warm open reads no record and reports the
// persisted counts, keys cover what changes the samples, and JSONL keys are unchanged.
#include "daemon/pipeline/formats/record_shard.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/mix.h"
#include "daemon/pipeline/formats/jsonl_reader.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/formats/token_cache.h"
#include "daemon/pipeline/formats/token_cache_files.h"
#include "tokenizer/tiny_tokenizer_testing.h"
#include "tokenizer/tokenizer.h"

namespace zephon::pipeline {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::WriteTextFile;
using Ids = std::vector<int32_t>;

// Token records from memory; nullopt entries are nulls.
class IdsSource final : public RecordSource {
 public:
  explicit IdsSource(std::vector<std::optional<Ids>> records) : records_(std::move(records)) {}
  absl::StatusOr<bool> Next(Value* value) override {
    if (next_ >= records_.size()) return false;
    const std::optional<Ids>& r = records_[next_++];
    *value = Value();
    if (r.has_value()) {
      value->kind = Value::Kind::kTokens;
      value->tokens = *r;
    }
    return true;
  }
  std::optional<uint64_t> NumRecords() const override { return records_.size(); }
  std::string Where() const override { return absl::StrCat("ids record ", next_ - 1); }

 private:
  const std::vector<std::optional<Ids>> records_;
  size_t next_ = 0;
};

// Text records from memory.
class TextSource final : public RecordSource {
 public:
  explicit TextSource(std::vector<std::string> records) : records_(std::move(records)) {}
  absl::StatusOr<bool> Next(Value* value) override {
    if (next_ >= records_.size()) return false;
    *value = Value();
    value->kind = Value::Kind::kText;
    value->text = records_[next_++];
    return true;
  }
  std::optional<uint64_t> NumRecords() const override { return std::nullopt; }
  std::string Where() const override { return absl::StrCat("text record ", next_ - 1); }

 private:
  const std::vector<std::string> records_;
  size_t next_ = 0;
};

class RecordShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("record_shard_test");
    options_.format = "memory";
    options_.field = "input_ids";
    options_.cache_dir = dir_ + "/cache";
  }

  absl::StatusOr<std::unique_ptr<RecordShard>> Open(const RecordShardOptions& options,
                                                    const std::string& checksum = "c1") {
    return RecordShard::Open(
        "/data/part-0.mem", 1234, "identity", checksum, options,
        [this]() -> absl::StatusOr<std::unique_ptr<RecordSource>> {
          ++opens_;
          if (!open_error_.ok()) return open_error_;
          return std::unique_ptr<RecordSource>(
              new IdsSource({Ids{1, 2}, std::nullopt, Ids{3}, std::nullopt, Ids{4, 5, 6}}));
        },
        nullptr);
  }

  std::string dir_;
  RecordShardOptions options_;
  int opens_ = 0;
  absl::Status open_error_;
};

TEST_F(RecordShardTest, ConvertsOnceThenServesTheCacheWithItsCounts) {
  auto token_cache = TokenCache::Create(options_.cache_dir, 0);
  ASSERT_TRUE(token_cache.ok()) << token_cache.status();
  options_.token_cache = token_cache->get();
  auto first = Open(options_);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(opens_, 1);
  EXPECT_EQ((*first)->FileName(), "part-0.mem");
  EXPECT_EQ((*first)->ByteSize(), 1234u);
  ASSERT_EQ((*first)->NumSamples(), 3u);
  Ids got;
  ASSERT_TRUE((*first)->AppendTokens(2, 0, 3, &got).ok());
  EXPECT_EQ(got, (Ids{4, 5, 6}));
  ASSERT_NE((*first)->text_stats(), nullptr);
  EXPECT_TRUE((*first)->text_stats()->tokenized);
  EXPECT_EQ((*first)->text_stats()->null_records, 2u);
  EXPECT_EQ((*first)->text_stats()->records, 5u);

  auto second = Open(options_);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(opens_, 1);  // a warm open reads no record
  EXPECT_FALSE((*second)->text_stats()->tokenized);
  EXPECT_EQ((*second)->text_stats()->null_records, 2u);
  EXPECT_EQ((*second)->text_stats()->tokens, 6u);
  EXPECT_EQ((*second)->cache_prefix(), (*first)->cache_prefix());
  const TokenCacheStats stats = (*token_cache)->Stats();
  EXPECT_EQ(stats.misses, 1u);
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_TRUE(fs::exists((*first)->cache_prefix() + ".stats"));
}

TEST_F(RecordShardTest, KeyCoversFormatChecksumFieldAndOnNull) {
  const std::string base = RecordShard::Key("identity", "c1", options_);
  EXPECT_EQ(base, RecordShard::Key("identity", "c1", options_));
  EXPECT_NE(base, RecordShard::Key("identity2", "c1", options_));
  EXPECT_NE(base, RecordShard::Key("identity", "c2", options_));
  RecordShardOptions o = options_;
  o.format = "other";
  EXPECT_NE(base, RecordShard::Key("identity", "c1", o));
  o = options_;
  o.field = "ids";
  EXPECT_NE(base, RecordShard::Key("identity", "c1", o));
  o = options_;
  o.on_null = OnNull::kError;
  EXPECT_NE(base, RecordShard::Key("identity", "c1", o));
  o = options_;
  o.convert.block_bytes = 7;  // how it runs is not what it yields
  EXPECT_EQ(base, RecordShard::Key("identity", "c1", o));
  // Not the JSONL domain's key for the same identity and field.
  EXPECT_NE(base, CacheKey("zephon-jsonl-cache-v1", "identity", "input_ids"));
}

TEST_F(RecordShardTest, ANewChecksumConvertsAgain) {
  ASSERT_TRUE(Open(options_, "c1").ok());
  ASSERT_TRUE(Open(options_, "c2").ok());
  EXPECT_EQ(opens_, 2);
}

TEST_F(RecordShardTest, OpenerErrorsPropagateAndLeaveNoCache) {
  open_error_ = absl::DataLossError("part-0.mem: bad magic");
  auto shard = Open(options_);
  ASSERT_FALSE(shard.ok());
  EXPECT_EQ(shard.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(shard.status().message(), "part-0.mem: bad magic");
  open_error_ = absl::OkStatus();
  ASSERT_TRUE(Open(options_).ok());
  EXPECT_EQ(opens_, 2);
}

TEST_F(RecordShardTest, OnNullErrorFailsNamingTheRecord) {
  options_.on_null = OnNull::kError;
  auto shard = Open(options_);
  ASSERT_FALSE(shard.ok());
  EXPECT_EQ(shard.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(shard.status().message().find("ids record 1"), std::string::npos) << shard.status();
}

TEST_F(RecordShardTest, BadOptionsAreRefusedNamingTheShard) {
  RecordShardOptions o = options_;
  o.field.clear();
  auto shard = Open(o);
  ASSERT_FALSE(shard.ok());
  EXPECT_NE(shard.status().message().find("/data/part-0.mem: empty field"), std::string::npos);
  o = options_;
  o.cache_dir.clear();
  EXPECT_FALSE(Open(o).ok());
  EXPECT_EQ(opens_, 0);
}

TEST_F(RecordShardTest, TextRecordsAreTokenized) {
  auto tok = tokenizer::Tokenizer::FromJson(tokenizer::kTinyLlama2Json, {});
  ASSERT_TRUE(tok.ok()) << tok.status();
  TextTokenization text;
  text.tokenizer = std::shared_ptr<const tokenizer::Tokenizer>(*std::move(tok));
  text.special_tokens = tokenizer::SpecialTokens::kNone;
  options_.text = &text;
  auto shard = RecordShard::Open(
      "/data/t.mem", 10, "identity", "c1", options_,
      []() -> absl::StatusOr<std::unique_ptr<RecordSource>> {
        return std::unique_ptr<RecordSource>(new TextSource({"hello world", "", "world"}));
      },
      nullptr);
  ASSERT_TRUE(shard.ok()) << shard.status();
  ASSERT_EQ((*shard)->NumSamples(), 3u);
  Ids got;
  ASSERT_TRUE((*shard)->AppendTokens(0, 0, (*shard)->SampleLength(0), &got).ok());
  EXPECT_EQ(got, *text.tokenizer->Encode("hello world", tokenizer::SpecialTokens::kNone));
  EXPECT_EQ((*shard)->SampleLength(1), 0u);
  EXPECT_EQ((*shard)->text_stats()->records, 3u);
  // The text key differs from the token key of the same source.
  RecordShardOptions tokens = options_;
  tokens.text = nullptr;
  EXPECT_NE(RecordShard::Key("identity", "c1", options_),
            RecordShard::Key("identity", "c1", tokens));
}

// JSONL's cache keys are what earlier releases computed: HashBytes of the layout in
// jsonl_reader.h, so existing caches stay valid.
TEST(JsonlKeyTest, TokenArrayAndTextKeysAreUnchanged) {
  const std::string dir = MakeTempDir("jsonl_key_test");
  const std::string path = dir + "/a.jsonl";
  ASSERT_TRUE(WriteTextFile(path, "{\"input_ids\": [1, 2], \"text\": \"hi\"}\n").ok());
  auto st = StatSource(path);
  ASSERT_TRUE(st.ok());
  std::string identity = fs::absolute(path).lexically_normal().string();
  identity.push_back('\0');
  AppendU64(st->size, &identity);
  AppendU64(st->mtime_ns, &identity);
  auto shard = JsonlShard::Open(path, "input_ids", dir + "/cache");
  ASSERT_TRUE(shard.ok()) << shard.status();
  const std::string want =
      absl::StrFormat("%016x", HashBytes(std::string("zephon-jsonl-cache-v1\0", 22) + identity +
                                         "input_ids"));
  EXPECT_EQ(fs::path((*shard)->cache_prefix()).filename().string(), want);

  auto tok = tokenizer::Tokenizer::FromJson(tokenizer::kTinyLlama2Json, {});
  ASSERT_TRUE(tok.ok()) << tok.status();
  TextTokenization text;
  text.tokenizer = std::shared_ptr<const tokenizer::Tokenizer>(*std::move(tok));
  JsonlShardOptions options;
  options.cache_dir = dir + "/cache";
  options.text = &text;
  auto text_shard = JsonlShard::Open(path, options);
  ASSERT_TRUE(text_shard.ok()) << text_shard.status();
  const std::string want_text = absl::StrFormat(
      "%016x", HashBytes(std::string("zephon-text-cache-v1\0", 21) + identity +
                         TextOptionBytes(text)));
  EXPECT_EQ(fs::path((*text_shard)->cache_prefix()).filename().string(), want_text);
}

}  // namespace
}  // namespace zephon::pipeline
