// JSONL text shards: tokenization into the token cache (jsonl_reader.h text mode,
// text_convert.h). The string field scanner's own tests are in jsonl_test.cc.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "daemon/pipeline/formats/dataset.h"
#include "daemon/pipeline/formats/jsonl_reader.h"
#include "daemon/pipeline/formats/test_pool_testing.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/formats/text_convert.h"
#include "tokenizer/tiny_tokenizer_testing.h"
#include "tokenizer/tokenizer.h"

namespace zephon::pipeline {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::TestPool;
using testing::WriteTextFile;
using tokenizer::SpecialTokens;
using Samples = std::vector<std::vector<int32_t>>;

std::shared_ptr<const tokenizer::Tokenizer> Tiny(int32_t eos = 2) {
  tokenizer::TokenizerOptions options;
  options.eos_token_id = eos;
  auto tok = tokenizer::Tokenizer::FromJson(tokenizer::kTinyLlama2Json, options);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::shared_ptr<const tokenizer::Tokenizer>(*std::move(tok));
}

std::vector<int32_t> Encode(std::string_view text, SpecialTokens mode = SpecialTokens::kNone) {
  auto ids = Tiny()->Encode(text, mode);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return *ids;
}

Samples AllSamples(const ShardReader& shard) {
  Samples out(shard.NumSamples());
  for (uint64_t i = 0; i < shard.NumSamples(); ++i) {
    EXPECT_TRUE(shard.AppendTokens(i, 0, shard.SampleLength(i), &out[i]).ok());
  }
  return out;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class TextShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("text_shard_test");
    cache_ = dir_ + "/cache";
    text_.tokenizer = Tiny();
    text_.special_tokens = SpecialTokens::kNone;
  }

  std::string Write(const std::string& name, const std::string& content) {
    const std::string path = dir_ + "/" + name;
    EXPECT_TRUE(WriteTextFile(path, content).ok());
    return path;
  }

  absl::StatusOr<std::unique_ptr<JsonlShard>> Open(const std::string& path,
                                                   const TextTokenization& text,
                                                   TextConvertOptions convert = {}) {
    JsonlShardOptions options;
    options.cache_dir = cache_;
    options.text = &text;
    options.convert = std::move(convert);
    return JsonlShard::Open(path, options);
  }

  std::string dir_, cache_;
  TextTokenization text_;
};

TEST_F(TextShardTest, SamplesAreTheTokenizersIdsForEverySpecialTokensMode) {
  const std::vector<std::string> texts = {"a b", "ab ab a", "", " ", "b\na\tb"};
  std::string jsonl;
  for (const auto& t : texts) jsonl += absl::StrCat(R"({"id": 1, "text": ")",
                                                    t == "b\na\tb" ? "b\\na\\tb" : t, "\"}\n");
  const std::string path = Write("modes.jsonl", jsonl);
  for (SpecialTokens mode : {SpecialTokens::kNone, SpecialTokens::kBos, SpecialTokens::kEos,
                             SpecialTokens::kBosEos, SpecialTokens::kTokenizerDefault}) {
    TextTokenization text = text_;
    text.special_tokens = mode;
    auto shard = Open(path, text);
    ASSERT_TRUE(shard.ok()) << shard.status();
    Samples want;
    for (const auto& t : texts) want.push_back(Encode(t, mode));
    EXPECT_EQ(AllSamples(**shard), want) << static_cast<int>(mode);
    const TextShardStats* stats = (*shard)->text_stats();
    ASSERT_NE(stats, nullptr);
    EXPECT_EQ(stats->records, texts.size());
    EXPECT_EQ(stats->samples, texts.size());
    EXPECT_TRUE(stats->tokenized);
  }
  // Empty text is zero tokens plus the requested BOS/EOS.
  TextTokenization both = text_;
  both.special_tokens = SpecialTokens::kBosEos;
  EXPECT_EQ(AllSamples(**Open(path, both))[2], (std::vector<int32_t>{1, 2}));
}

TEST_F(TextShardTest, TruncationAndSplitChildren) {
  const std::string long_text = "ab ab ab ab ab ab ab";  // more than 5 ids
  const std::vector<int32_t> ids = Encode(long_text, SpecialTokens::kEos);
  ASSERT_GT(ids.size(), 10u);
  const std::string path =
      Write("long.jsonl", absl::StrCat(R"({"text": ")", long_text, "\"}\n", R"({"text": ""})",
                                       "\n", R"({"text": "a"})", "\n"));
  TextTokenization text = text_;
  text.special_tokens = SpecialTokens::kEos;
  text.max_length = 5;
  text.long_samples = TextTokenization::LongSamples::kTruncate;
  auto truncated = Open(path, text);
  ASSERT_TRUE(truncated.ok()) << truncated.status();
  EXPECT_EQ(AllSamples(**truncated),
            (Samples{std::vector<int32_t>(ids.begin(), ids.begin() + 5), {2}, Encode("a", SpecialTokens::kEos)}));
  EXPECT_EQ((*truncated)->text_stats()->truncated_records, 1u);

  text.long_samples = TextTokenization::LongSamples::kSplit;
  auto split = Open(path, text);
  ASSERT_TRUE(split.ok()) << split.status();
  Samples want;
  for (size_t at = 0; at < ids.size(); at += 5) {
    want.emplace_back(ids.begin() + at, ids.begin() + std::min(ids.size(), at + 5));
  }
  want.push_back({2});
  want.push_back(Encode("a", SpecialTokens::kEos));
  EXPECT_EQ(AllSamples(**split), want);
  EXPECT_EQ((*split)->text_stats()->split_records, 1u);
  EXPECT_EQ((*split)->text_stats()->samples, want.size());

  // An empty encoding split is one empty sample.
  text.special_tokens = SpecialTokens::kNone;
  auto empty = Open(Write("empty.jsonl", "{\"text\": \"\"}\n"), text);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(AllSamples(**empty), (Samples{{}}));
  // Limits without a length are refused up front.
  text.max_length = 0;
  auto no_length = Open(path, text);
  EXPECT_EQ(no_length.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(no_length.status().message().find("max_length"), std::string::npos);
}

TEST_F(TextShardTest, MissingOrNonStringFieldNamesFileLineAndFieldOrIsSkipped) {
  const std::string path = Write("missing.jsonl",
                                 "{\"text\": \"a\"}\n\n{\"body\": \"b\"}\n{\"text\": 5}\n"
                                 "{\"text\": \"b\", \"meta\": {\"text\": 1}}\n");
  auto shard = Open(path, text_);
  ASSERT_FALSE(shard.ok());
  EXPECT_EQ(shard.status().code(), absl::StatusCode::kDataLoss);
  const std::string msg(shard.status().message());
  EXPECT_NE(msg.find(path), std::string::npos) << msg;
  EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"text\" is missing"), std::string::npos) << msg;
  EXPECT_NE(msg.find("on_missing=\"skip\""), std::string::npos) << msg;

  auto not_string = Open(Write("number.jsonl", "{\"text\": [1]}\n"), text_);
  EXPECT_NE(not_string.status().message().find("line 1: text field \"text\" is not a string "
                                               "(it is an array)"),
            std::string::npos)
      << not_string.status();

  TextTokenization skip = text_;
  skip.skip_missing = true;
  auto skipped = Open(path, skip);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  EXPECT_EQ(AllSamples(**skipped), (Samples{Encode("a"), Encode("b")}));
  EXPECT_EQ((*skipped)->text_stats()->skipped_missing, 2u);
  EXPECT_EQ((*skipped)->text_stats()->records, 4u);
  // Malformed JSON is an error even when skipping.
  auto malformed = Open(Write("bad.jsonl", "{\"text\": \"a\"\n"), skip);
  EXPECT_EQ(malformed.status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(TextShardTest, InvalidUtf8AndLoneSurrogatesBecomeReplacementCharactersAndAreCounted) {
  const std::string path =
      Write("bad_utf8.jsonl",
            "\xEF\xBB\xBF{\"text\": \"a\xFF" "b\"}\n"   // BOM, then an invalid byte
            "{\"text\": \"a\\ud800b\"}\n"                 // an escaped lone surrogate
            "{\"text\": \"\\ud83d\\ude00\"}\n"            // a pair: valid
            "{\"text\": \"x\", \"other\": \"\\udc00\"}\n"  // lone surrogate elsewhere
            "  \r\n"
            "{\"text\": \"a\\u00e9\"}\n");
  auto shard = Open(path, text_);
  ASSERT_TRUE(shard.ok()) << shard.status();
  EXPECT_EQ(AllSamples(**shard), (Samples{Encode("a\xEF\xBF\xBD" "b"), Encode("a\xEF\xBF\xBD" "b"),
                                          Encode("\xF0\x9F\x98\x80"), Encode("x"),
                                          Encode("a\xC3\xA9")}));
  EXPECT_EQ((*shard)->text_stats()->invalid_utf8_records, 2u);
  EXPECT_EQ((*shard)->text_stats()->records, 5u);
}

TEST_F(TextShardTest, CompressedShardsReadLikePlainOnes) {
  const std::string content = "{\"text\": \"a b\"}\n\n{\"text\": \"ab\"}";
  const Samples want = {Encode("a b"), Encode("ab")};
  for (const std::string name : {"p.jsonl", "g.jsonl.gz", "z.jsonl.zst"}) {
    auto shard = Open(Write(name, content), text_);
    ASSERT_TRUE(shard.ok()) << name << shard.status();
    EXPECT_EQ(AllSamples(**shard), want) << name;
  }
}

TEST_F(TextShardTest, SecondOpenIsACacheHitWithTheSameStats) {
  const std::string path =
      Write("hit.jsonl", "{\"text\": \"a\xFF\"}\n{\"x\": 1}\n{\"text\": \"ab ab\"}\n");
  TextTokenization text = text_;
  text.skip_missing = true;
  auto first = Open(path, text);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE((*first)->text_stats()->tokenized);
  EXPECT_GT((*first)->text_stats()->tokenized_bytes, 0u);
  TestPool pool(2);
  TextConvertOptions convert;
  convert.submit = [&](std::function<void()> task) { return pool.Submit(std::move(task)); };
  auto second = Open(path, text, convert);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE((*second)->text_stats()->tokenized);
  EXPECT_EQ(pool.submitted(), 0);  // nothing tokenized
  EXPECT_TRUE((*second)->text_stats()->SameCounts(*(*first)->text_stats()));
  EXPECT_EQ((*second)->text_stats()->invalid_utf8_records, 1u);
  EXPECT_EQ(AllSamples(**second), AllSamples(**first));
  EXPECT_EQ((*second)->cache_prefix(), (*first)->cache_prefix());
  EXPECT_TRUE(fs::exists((*first)->cache_prefix() + ".stats"));

  // A cache whose .stats went missing is rebuilt, not served without its counts.
  fs::remove((*first)->cache_prefix() + ".stats");
  auto third = Open(path, text);
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_TRUE((*third)->text_stats()->tokenized);
  EXPECT_TRUE((*third)->text_stats()->SameCounts(*(*first)->text_stats()));
}

TEST_F(TextShardTest, CacheKeyCoversTokenizerAndEveryOptionButNotTheExecutor) {
  const std::string path = Write("key.jsonl", "{\"text\": \"a\", \"body\": \"b\"}\n");
  auto prefix = [&](const TextTokenization& t) {
    auto shard = Open(path, t);
    EXPECT_TRUE(shard.ok()) << shard.status();
    return shard.ok() ? (*shard)->cache_prefix() : std::string();
  };
  const std::string base = prefix(text_);
  std::vector<TextTokenization> variants(6, text_);
  variants[0].tokenizer = Tiny(/*eos=*/0);  // another fingerprint
  variants[1].field = "body";
  variants[2].special_tokens = SpecialTokens::kEos;
  variants[3].max_length = 4;
  variants[3].long_samples = TextTokenization::LongSamples::kTruncate;
  variants[4].max_length = 4;
  variants[4].long_samples = TextTokenization::LongSamples::kSplit;
  variants[5].skip_missing = true;
  std::set<std::string> prefixes = {base};
  for (const auto& v : variants) prefixes.insert(prefix(v));
  EXPECT_EQ(prefixes.size(), variants.size() + 1);
  // The same options give the same key; the token-array key of the file differs.
  EXPECT_EQ(prefix(text_), base);
  JsonlShardOptions arrays;
  arrays.cache_dir = cache_;
  auto array_path = Write("key2.jsonl", "{\"text\": \"a\", \"input_ids\": [1]}\n");
  auto as_arrays = JsonlShard::Open(array_path, arrays);
  ASSERT_TRUE(as_arrays.ok()) << as_arrays.status();
  auto as_text = Open(array_path, text_);
  ASSERT_TRUE(as_text.ok()) << as_text.status();
  EXPECT_NE((*as_arrays)->cache_prefix(), (*as_text)->cache_prefix());
}

// Text over several blocks, with a different length per record.
std::string ManyRecords(int n) {
  std::string jsonl;
  for (int i = 0; i < n; ++i) {
    std::string t;
    for (int k = 0; k < i % 37; ++k) t += (k % 3 == 0) ? "ab " : "a";
    absl::StrAppend(&jsonl, "{\"text\": \"", t, "\"}\n");
  }
  return jsonl;
}

TEST_F(TextShardTest, ParallelConversionIsByteIdenticalToInline) {
  const std::string path = Write("many.jsonl.zst", ManyRecords(3000));
  TextTokenization text = text_;
  text.special_tokens = SpecialTokens::kBosEos;
  text.max_length = 16;
  text.long_samples = TextTokenization::LongSamples::kSplit;
  auto inline_shard = Open(path, text);
  ASSERT_TRUE(inline_shard.ok()) << inline_shard.status();
  const std::string tok = ReadFile((*inline_shard)->cache_prefix() + ".tok");
  const std::string off = ReadFile((*inline_shard)->cache_prefix() + ".off");
  const std::string stats = ReadFile((*inline_shard)->cache_prefix() + ".stats");
  ASSERT_GT(off.size(), 3000u * 8);

  for (int in_flight : {1, 3, 8}) {
    fs::remove_all(cache_);
    TestPool pool(3);
    TextConvertOptions convert;
    convert.submit = [&](std::function<void()> task) { return pool.Submit(std::move(task)); };
    convert.block_bytes = 1000;  // many blocks
    convert.max_blocks_in_flight = in_flight;
    auto parallel = Open(path, text, convert);
    ASSERT_TRUE(parallel.ok()) << parallel.status();
    EXPECT_GT(pool.submitted(), 20);
    EXPECT_EQ(ReadFile((*parallel)->cache_prefix() + ".tok"), tok);
    EXPECT_EQ(ReadFile((*parallel)->cache_prefix() + ".off"), off);
    EXPECT_EQ(ReadFile((*parallel)->cache_prefix() + ".stats"), stats);
  }
  // A pool that refuses work (shut down) leaves the conversion to the opening thread.
  fs::remove_all(cache_);
  TestPool stopped(1);
  stopped.Stop();
  TextConvertOptions convert;
  convert.submit = [&](std::function<void()> task) { return stopped.Submit(std::move(task)); };
  convert.block_bytes = 1000;
  auto refused = Open(path, text, convert);
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(ReadFile((*refused)->cache_prefix() + ".tok"), tok);
}

TEST_F(TextShardTest, TwoThreadsOpeningOneShardTokenizeOnce) {
  const std::string path = Write("once.jsonl", ManyRecords(500));
  absl::Notification first_converting;
  // The first opener's executor holds it inside the conversion until the second opener
  // has had time to arrive; it then runs blocks inline (returns false).
  TextConvertOptions slow;
  slow.block_bytes = 1000;
  slow.submit = [&](std::function<void()>) {
    if (!first_converting.HasBeenNotified()) {
      first_converting.Notify();
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    return false;
  };
  absl::StatusOr<std::unique_ptr<JsonlShard>> a, b;
  std::thread first([&] { a = Open(path, text_, slow); });
  first_converting.WaitForNotification();
  std::thread second([&] { b = Open(path, text_); });
  first.join();
  second.join();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE((*a)->text_stats()->tokenized);
  EXPECT_FALSE((*b)->text_stats()->tokenized);
  EXPECT_EQ(AllSamples(**a), AllSamples(**b));
}

TEST_F(TextShardTest, ObjectStoreSourcesConvertTheSameWay) {
  const std::string path = Write("remote.jsonl.gz", "{\"text\": \"a b\"}\n{\"text\": \"ab\"}\n");
  auto local = Open(path, text_);
  ASSERT_TRUE(local.ok()) << local.status();
  JsonlShardOptions options;
  options.cache_dir = cache_;
  options.text = &text_;
  auto source = OpenLocalShardFile(path);
  ASSERT_TRUE(source.ok()) << source.status();
  auto remote = JsonlShard::Open(*std::move(source), "etag-1", options);
  ASSERT_TRUE(remote.ok()) << remote.status();
  EXPECT_EQ(AllSamples(**remote), AllSamples(**local));
  EXPECT_TRUE((*remote)->text_stats()->tokenized);
  EXPECT_NE((*remote)->cache_prefix(), (*local)->cache_prefix());
  // The same version again: a cache hit.
  auto again = JsonlShard::Open(*OpenLocalShardFile(path), "etag-1", options);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE((*again)->text_stats()->tokenized);
}

proto::DatasetSpec Spec(const std::string& path, const std::string& format = "") {
  proto::DatasetSpec spec;
  spec.set_name("web");
  spec.set_path(path);
  spec.set_format(format);
  return spec;
}

TEST_F(TextShardTest, ShardsConvertedAtOnceAreTheSequentialOnesAndFailTheSameWay) {
  const std::string dir = dir_ + "/many";
  fs::create_directories(dir);
  for (int s = 0; s < 7; ++s) {
    std::string jsonl;
    for (int r = 0; r < 40 + 13 * s; ++r) {
      absl::StrAppend(&jsonl, R"({"text": ")", std::string(r % 9, 'a'), " b", s, "\"}\n");
    }
    Write(absl::StrCat("many/part-", s, ".jsonl"), jsonl);
  }
  TestPool pool(2);
  OpenOptions sequential;
  sequential.cache_dir = dir_ + "/cache-sequential";
  sequential.text_convert.submit = [&](std::function<void()> t) {
    return pool.Submit(std::move(t));
  };
  sequential.text_convert.block_bytes = 64;  // several blocks a shard
  OpenOptions at_once = sequential;
  at_once.cache_dir = dir_ + "/cache-at-once";
  at_once.shards_at_once = 3;
  auto a = Dataset::Open(Spec(dir), sequential, &text_);
  auto b = Dataset::Open(Spec(dir), at_once, &text_);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ((*b)->NumShards(), 7u);
  EXPECT_EQ((*a)->Fingerprint(), (*b)->Fingerprint());
  for (uint32_t s = 0; s < 7; ++s) {
    EXPECT_EQ((*b)->shard(s).FileName(), absl::StrCat("part-", s, ".jsonl"));
    EXPECT_EQ(AllSamples((*a)->shard(s)), AllSamples((*b)->shard(s))) << s;
    EXPECT_TRUE((*b)->ShardTextStats(s)->SameCounts(*(*a)->ShardTextStats(s))) << s;
  }
  const TextShardStats sum = (*b)->TextStats();
  EXPECT_TRUE(sum.tokenized);
  EXPECT_GT(sum.tokenize_seconds, 0);
  EXPECT_EQ(sum.records, (*a)->TextStats().records);

  // Two bad shards: the error is the first one's, as a sequential open reports it.
  Write("many/part-2.jsonl", "{\"text\": \"a\"}\n{\"t\": 1}\n");
  Write("many/part-5.jsonl", "{\"nope\": 1}\n");
  at_once.cache_dir = dir_ + "/cache-bad";
  for (int i = 0; i < 5; ++i) {
    auto bad = Dataset::Open(Spec(dir), at_once, &text_);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("part-2.jsonl: line 2"), std::string::npos)
        << bad.status();
  }
}

TEST_F(TextShardTest, DatasetsOfTextAreJsonlOnlyAndFingerprintTheirOptions) {
  Write("a.jsonl", "{\"text\": \"a b\", \"input_ids\": [1, 2]}\n");
  Write("b.jsonl.zst", "{\"text\": \"ab\", \"input_ids\": [3]}\n{\"text\": \"\", \"input_ids\": []}\n");
  OpenOptions options;
  options.cache_dir = cache_;
  auto arrays = Dataset::Open(Spec(dir_), options);
  ASSERT_TRUE(arrays.ok()) << arrays.status();
  EXPECT_FALSE((*arrays)->is_text());
  EXPECT_EQ((*arrays)->ShardTextStats(0), nullptr);
  auto text = Dataset::Open(Spec(dir_), options, &text_);
  ASSERT_TRUE(text.ok()) << text.status();
  ASSERT_TRUE((*text)->is_text());
  EXPECT_EQ((*text)->format(), "jsonl");
  EXPECT_EQ((*text)->NumSamples(), 3u);
  EXPECT_NE((*text)->Fingerprint(), (*arrays)->Fingerprint());
  EXPECT_EQ((*text)->ShardTextStats(0)->records, 1u);
  EXPECT_EQ((*text)->ShardTextStats(1)->records, 2u);
  EXPECT_TRUE((*text)->TextStats().tokenized);
  EXPECT_FALSE((*Dataset::Open(Spec(dir_), options, &text_))->TextStats().tokenized);
  // Per-shard counts of bad text, and their sum.
  const std::string bad = dir_ + "/bad";
  fs::create_directories(bad);
  Write("bad/a.jsonl", "{\"text\": \"a\xFF\"}\n");
  Write("bad/b.jsonl.gz", "{\"text\": \"ab\"}\n{\"text\": \"\\ud800\"}\n{\"t\": 1}\n");
  TextTokenization skip = text_;
  skip.skip_missing = true;
  auto bad_text = Dataset::Open(Spec(bad), options, &skip);
  ASSERT_TRUE(bad_text.ok()) << bad_text.status();
  EXPECT_EQ((*bad_text)->ShardTextStats(0)->invalid_utf8_records, 1u);
  EXPECT_EQ((*bad_text)->ShardTextStats(1)->invalid_utf8_records, 1u);
  const TextShardStats sum = (*bad_text)->TextStats();
  EXPECT_EQ(sum.records, 4u);
  EXPECT_EQ(sum.samples, 3u);
  EXPECT_EQ(sum.invalid_utf8_records, 2u);
  EXPECT_EQ(sum.skipped_missing, 1u);
  TextTokenization eos = text_;
  eos.special_tokens = SpecialTokens::kEos;
  auto other = Dataset::Open(Spec(dir_), options, &eos);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE((*other)->Fingerprint(), (*text)->Fingerprint());
  EXPECT_EQ((*Dataset::Open(Spec(dir_), options, &text_))->Fingerprint(), (*text)->Fingerprint());

  // Pre-tokenized formats are refused with the path and the fix.
  const std::string mega = dir_ + "/mega";
  fs::create_directories(mega);
  ASSERT_TRUE(testing::WriteMegatronShard(mega + "/part", {{1, 2}}).ok());
  for (const auto& spec : {Spec(mega), Spec(mega + "/part", "megatron"),
                           Spec(dir_ + "/a.jsonl", "flat")}) {
    auto refused = Dataset::Open(spec, options, &text_);
    ASSERT_FALSE(refused.ok()) << spec.path();
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string msg(refused.status().message());
    EXPECT_NE(msg.find(spec.path()), std::string::npos) << msg;
    EXPECT_NE(msg.find("pre-tokenized data needs no tokenize"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace zephon::pipeline

namespace zephon::pipeline {
namespace {

// keep_payload: the cache also keeps each sample's source record, the JSONL line whole
// (valid UTF-8; every piece of a split record keeps it), under another key than the same
// tokenization without it, whose samples are the same.
TEST_F(TextShardTest, KeepPayloadKeepsEachSamplesSourceLineInItsOwnCache) {
  const std::string long_text = "ab ab ab ab ab ab ab";
  const std::string long_line =
      absl::StrCat("{\"id\": 7, \"text\": \"", long_text, "\", \"tags\": [\"x\"]}");
  const std::string path = Write(
      "keep.jsonl", absl::StrCat("{\"text\": \"a\xFF" "b\"}\n{\"text\": \"\"}\n", long_line,
                                 "\n"));
  TextTokenization text = text_;
  text.max_length = 5;
  text.long_samples = TextTokenization::LongSamples::kSplit;
  auto plain = Open(path, text);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE((*plain)->HasPayload());
  text.keep_payload = true;
  for (int open = 0; open < 2; ++open) {  // converted, then a cache hit
    auto kept = Open(path, text);
    ASSERT_TRUE(kept.ok()) << kept.status();
    EXPECT_NE((*kept)->cache_prefix(), (*plain)->cache_prefix());
    EXPECT_EQ(AllSamples(**kept), AllSamples(**plain));
    ASSERT_TRUE((*kept)->HasPayload());
    ASSERT_GT((*kept)->NumSamples(), 3u);  // the long record split into pieces
    std::string got;
    ASSERT_TRUE((*kept)->CopyPayload(0, &got).ok());
    EXPECT_EQ(got, "{\"text\": \"a\xEF\xBF\xBD" "b\"}");
    EXPECT_EQ((*kept)->PayloadBytes(0), got.size());
    ASSERT_TRUE((*kept)->CopyPayload(1, &got).ok());
    EXPECT_EQ(got, "{\"text\": \"\"}");
    for (uint64_t i = 2; i < (*kept)->NumSamples(); ++i) {
      ASSERT_TRUE((*kept)->CopyPayload(i, &got).ok());
      EXPECT_EQ(got, long_line) << "piece " << i;
    }
    EXPECT_TRUE(fs::exists((*kept)->cache_prefix() + ".pay"));
    EXPECT_TRUE(fs::exists((*kept)->cache_prefix() + ".pao"));
  }
  // A cache whose text went missing is rebuilt, not served without it.
  auto kept = Open(path, text);
  ASSERT_TRUE(kept.ok());
  fs::remove((*kept)->cache_prefix() + ".pao");
  auto rebuilt = Open(path, text);
  ASSERT_TRUE(rebuilt.ok()) << rebuilt.status();
  EXPECT_TRUE((*rebuilt)->text_stats()->tokenized);
  EXPECT_TRUE((*rebuilt)->HasPayload());
}

}  // namespace
}  // namespace zephon::pipeline
