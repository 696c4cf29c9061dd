#include "daemon/pipeline/formats/jsonl_reader.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/pipeline/formats/dataset.h"
#include "daemon/pipeline/formats/json_scan.h"
#include "daemon/pipeline/formats/line_reader.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/formats/token_cache.h"

namespace zephon::pipeline {
namespace {

namespace fs = std::filesystem;
using testing::MakeTempDir;
using testing::WriteTextFile;

absl::StatusOr<std::vector<int32_t>> Extract(std::string_view line,
                                             std::string_view field = "input_ids",
                                             size_t* offset = nullptr) {
  std::vector<int32_t> out;
  size_t at = 0;
  absl::Status s = ExtractTokenArray(line, field, &out, &at);
  if (offset) *offset = at;
  if (!s.ok()) return s;
  return out;
}

TEST(JsonScanTest, FindsTheTopLevelFieldAndSkipsEveryOtherValue) {
  const std::string line =
      R"( {"text": "a \"quoted\" \\ \/ \b\f\n\r\t \u00e9 \ud83d\ude00 [not, an, array]",)"
      R"( "meta": {"input_ids": [9, 9], "deep": [[[{"x": null}]], true, false]},)"
      R"( "score": -1.5e-3, "n": 0, "big": 12345678901234567890, "e": 1E+2,)"
      R"( "input_ids": [ 0 , 1,2147483647 ], "after": []} )";
  auto tokens = Extract(line);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, (std::vector<int32_t>{0, 1, 2147483647}));
  EXPECT_EQ(*Extract(R"({"input_ids": []})"), std::vector<int32_t>{});
  // Keys are compared after unescaping.
  EXPECT_EQ(*Extract(R"({"input\u005fids": [7]})"), std::vector<int32_t>{7});
  EXPECT_EQ(*Extract(R"({"ids": [3], "input_ids": [4]})", "ids"), std::vector<int32_t>{3});
  // JSON numbers simdjson cannot represent are still numbers (as before simdjson).
  EXPECT_EQ(*Extract(R"({"a": [123456789012345678901234567890, 1e999, -1E-999],)"
                     R"( "input_ids": [5]})"),
            std::vector<int32_t>{5});
}

TEST(JsonScanTest, AScannerReusedInPlaceAgreesWithOneOffScans) {
  const std::vector<std::string> lines = {
      R"({"input_ids": [1, 2, 3], "t": "x"})", R"({"input_ids": [1, -2]})",
      R"({"t": "a long text value that is longer than the padding, )"
      R"(so the parser's buffers have to grow", "input_ids": [2147483647, 0]})",
      R"({"input_ids": [4]} x)", R"({"input_ids": []})"};
  TokenArrayScanner scanner("input_ids");
  for (const std::string& line : lines) {
    // The line in place, followed by kJsonPaddingBytes of bytes that are not JSON.
    const std::string buffer = line + std::string(kJsonPaddingBytes, '}');
    std::vector<int32_t> in_place, one_off;
    size_t at_in_place = 999, at_one_off = 999;
    const absl::Status a = scanner.Scan(std::string_view(buffer.data(), line.size()),
                                        kJsonPaddingBytes, &in_place, &at_in_place);
    const absl::Status b = ExtractTokenArray(line, "input_ids", &one_off, &at_one_off);
    EXPECT_EQ(a, b) << line;
    if (a.ok()) {
      EXPECT_EQ(in_place, one_off) << line;
    } else {
      EXPECT_EQ(at_in_place, at_one_off) << line;
    }
  }
  // Without enough padding the scanner copies; the answer is the same.
  std::vector<int32_t> copied;
  size_t at = 0;
  ASSERT_TRUE(scanner.Scan(lines[0], 3, &copied, &at).ok());
  EXPECT_EQ(copied, (std::vector<int32_t>{1, 2, 3}));
}

TEST(JsonScanTest, ErrorsSayWhatIsWrongAndWhere) {
  struct Case {
    std::string line;
    std::string message;
    size_t offset;
  };
  const std::vector<Case> cases = {
      {R"({"text": "x"})", "missing field \"input_ids\"", 0},
      {R"({"input_ids": "1 2"})", "is not an array", 14},
      {R"({"input_ids": {"a": 1}})", "is not an array", 14},
      {R"({"input_ids": [1, 2.5]})", "element 1 is not an integer: 2.5", 18},
      {R"({"input_ids": [1e3]})", "element 0 is not an integer: 1e3", 15},
      {R"({"input_ids": [1, "2"]})", "element 1 is not an integer", 18},
      {R"({"input_ids": [-1]})", "element 0 is negative", 15},
      {R"({"input_ids": [2147483648]})", "out of range", 15},
      {R"({"input_ids": [1], "input_ids": [2]})", "appears more than once", 19},
      {R"({"input_ids": [1e999]})", "element 0 is not an integer: 1e999", 15},
      {R"({"input_ids": [99999999999999999999999]})", "out of range", 15},
      {R"({"input_ids": [1,]})", "malformed JSON: unexpected character", 17},
      {R"({"input_ids": [1 2]})", "malformed JSON: unexpected character", 17},
      {R"({"a": 01, "input_ids": []})", "malformed JSON: invalid number", 6},
      {R"({"a": 1., "input_ids": []})", "malformed JSON: invalid number", 6},
      {R"({"a": "x\q", "input_ids": []})", "invalid escape", 6},
      {R"({"a": "\u12G4", "input_ids": []})", "invalid escape", 6},
      {R"({"x\q": 1, "input_ids": []})", "invalid escape", 1},
      // Stricter than the hand-written scanner it replaced: unpaired surrogates and
      // bytes that are not UTF-8 are refused.
      {R"({"a": "\ud800", "input_ids": []})", "unpaired \\u surrogate", 6},
      {"{\"a\": \"\xff\", \"input_ids\": []}", "not valid UTF-8", 0},
      {"{\"input_ids\": [1, 2\xff]}", "not valid UTF-8", 0},
      // An escaped multi-byte character: at its string, also in the fallback kernel (which
      // calls it bad UTF-8 by itself).
      {"{\"a\": \"x\\\xc3\xa9\", \"input_ids\": []}", "invalid escape", 6},
      // Errors found while indexing the whole line have no finer position than 0.
      {R"({"a": "unterminated)", "unterminated string", 0},
      {R"({"input_ids": [19"4]})", "unterminated string", 0},
      {"{\"a\": \"tab\there\", \"input_ids\": []}", "raw control character", 0},
      {R"({"a": tru, "input_ids": []})", "invalid literal", 6},
      {R"({"a": nullx, "input_ids": []})", "invalid literal", 6},
      {R"({"input_ids": []}})", "trailing characters after the object", 17},
      {R"({"input_ids": []} x)", "characters after the object", 0},
      {R"([1, 2])", "expected a JSON object", 0},
      {R"({"input_ids": [1])", "unbalanced braces or brackets", 0},
      {R"({"a" 1})", "unexpected character", 5},
      {R"({"input_ids": [], })", "unexpected character", 18},
      {"", "malformed JSON", 0},
  };
  for (const auto& c : cases) {
    size_t offset = 999;
    auto r = Extract(c.line, "input_ids", &offset);
    ASSERT_FALSE(r.ok()) << c.line;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.message), std::string::npos)
        << c.line << " -> " << r.status();
    EXPECT_EQ(offset, c.offset) << c.line << " -> " << r.status();
  }
  std::string deep = R"({"a": )" + std::string(300, '[') + std::string(300, ']') + "}";
  EXPECT_NE(Extract(deep).status().message().find("nesting deeper than"), std::string::npos);
}

TEST(StringFieldScannerTest, ReadsTheTopLevelStringWithTheSameStrictness) {
  StringFieldScanner scanner("text");
  StringField f;
  size_t at = 0;
  ASSERT_TRUE(scanner.Scan(R"({"meta": {"text": 1}, "te\u0078t": "a\"\\\/\n\u00e9\ud83d\ude00"})",
                           0, &f, &at)
                  .ok());
  EXPECT_EQ(f.state, StringField::State::kString);
  EXPECT_EQ(f.value, "a\"\\/\n\xC3\xA9\xF0\x9F\x98\x80");
  EXPECT_FALSE(f.replaced_surrogates);

  ASSERT_TRUE(scanner.Scan(R"({"a": 1})", 0, &f, &at).ok());
  EXPECT_EQ(f.state, StringField::State::kMissing);
  ASSERT_TRUE(scanner.Scan(R"({"text": null})", 0, &f, &at).ok());
  EXPECT_EQ(f.state, StringField::State::kNotString);
  EXPECT_EQ(f.found_type, "null");
  EXPECT_EQ(f.offset, 9u);

  // Unpaired surrogates: high alone, low alone, high before a non-surrogate escape.
  ASSERT_TRUE(scanner.Scan(R"({"text": "\ud800|\udfff|\ud800\u0041"})", 0, &f, &at).ok());
  EXPECT_EQ(f.value, "\xEF\xBF\xBD|\xEF\xBF\xBD|\xEF\xBF\xBD" "A");
  EXPECT_TRUE(f.replaced_surrogates);

  // Still refused: duplicates, bad escapes, malformed JSON, other values' bad escapes.
  for (const char* bad : {R"({"text": "a", "text": "b"})", R"({"text": "\q"})",
                          R"({"text": "\ud800\uZZZZ"})", R"({"text": "a",})",
                          R"({"x": "\q", "text": "a"})", R"({"text": "a"} x)"}) {
    EXPECT_EQ(scanner.Scan(bad, 0, &f, &at).code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

std::vector<std::string> ReadLines(const std::string& path) {
  auto reader = LineReader::Open(path);
  EXPECT_TRUE(reader.ok()) << reader.status();
  std::vector<std::string> lines;
  std::string_view line;
  while (true) {
    auto more = (*reader)->Next(&line);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    lines.emplace_back(line);
  }
  return lines;
}

TEST(LineReaderTest, AllCompressionsYieldTheSameLines) {
  const std::string dir = MakeTempDir("line_reader");
  std::string text = "first\r\n\nthird";
  for (int i = 0; i < 5000; ++i) text += absl::StrCat("\nline ", i, std::string(i % 97, 'x'));
  for (const char* name : {"t.txt", "t.txt.gz", "t.txt.zst"}) {
    ASSERT_TRUE(WriteTextFile(dir + "/" + name, text).ok());
    const auto lines = ReadLines(dir + "/" + name);
    ASSERT_EQ(lines.size(), 5003u) << name;
    EXPECT_EQ(lines[0], "first\r");
    EXPECT_EQ(lines[1], "");
    EXPECT_EQ(lines[2], "third");
    EXPECT_EQ(lines[5002], absl::StrCat("line 4999", std::string(4999 % 97, 'x')));
  }
}

TEST(LineReaderTest, ConcatenatedMembersAndFramesAreReadInSequence) {
  const std::string dir = MakeTempDir("line_reader_concat");
  for (const char* name : {"a.gz", "a.zst"}) {
    const std::string one = dir + "/1" + name, two = dir + "/2" + name;
    ASSERT_TRUE(WriteTextFile(one, "a\nb\n").ok());
    ASSERT_TRUE(WriteTextFile(two, "c\n").ok());
    std::ifstream f1(one, std::ios::binary), f2(two, std::ios::binary);
    std::ofstream out(dir + "/" + name, std::ios::binary);
    out << f1.rdbuf() << f2.rdbuf();
    out.close();
    EXPECT_EQ(ReadLines(dir + "/" + name), (std::vector<std::string>{"a", "b", "c"})) << name;
  }
}

void Truncate(const std::string& path, double fraction) {
  const auto size = fs::file_size(path);
  fs::resize_file(path, static_cast<uintmax_t>(size * fraction));
}

// An endless plain-text file of one line with no '\n' (a hostile stream), counting the
// bytes read from it.
class EndlessLineFile final : public ShardFile {
 public:
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return uint64_t{1} << 40; }
  absl::Status ReadAt(uint64_t, uint64_t n, char* out) const override {
    std::memset(out, '7', n);
    read_bytes += n;
    return absl::OkStatus();
  }
  mutable uint64_t read_bytes = 0;

 private:
  const std::string path_ = "s3://bucket/endless.jsonl";
};

TEST(LineReaderTest, LinesOverTheLimitFailNamingFileAndLineInEveryCompression) {
  const std::string dir = MakeTempDir("line_limit");
  constexpr uint64_t kLimit = 1000;
  const std::string long_line = std::string(kLimit + 1, 'x');
  const std::string at_limit = std::string(kLimit, 'y');
  for (const char* name : {"t.txt", "t.txt.gz", "t.txt.zst"}) {
    const std::string path = dir + "/" + name;
    ASSERT_TRUE(WriteTextFile(path, "short\n" + at_limit + "\n" + long_line + "\nafter\n").ok());
    auto reader = LineReader::Open(path, kLimit);
    ASSERT_TRUE(reader.ok()) << reader.status();
    std::string_view line;
    ASSERT_TRUE(*(*reader)->Next(&line));
    ASSERT_TRUE(*(*reader)->Next(&line));  // exactly at the limit: fine
    EXPECT_EQ(line, at_limit);
    const absl::StatusOr<bool> over = (*reader)->Next(&line);
    ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << name;
    EXPECT_NE(over.status().message().find(path + ": line 3 "), std::string::npos)
        << over.status();
    EXPECT_NE(over.status().message().find("limit of 1000 bytes"), std::string::npos)
        << over.status();
    EXPECT_NE(over.status().message().find("--max-jsonl-line-bytes"), std::string::npos)
        << over.status();
  }
  EXPECT_EQ(LineReader::Open(dir + "/t.txt", 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LineReaderTest, AnEndlessLineIsRefusedAfterBufferingAboutTheLimit) {
  auto file = std::make_unique<EndlessLineFile>();
  const EndlessLineFile* endless = file.get();
  constexpr uint64_t kLimit = uint64_t{1} << 20;
  auto reader = LineReader::Open(std::move(file), kLimit);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::string_view line;
  const absl::StatusOr<bool> over = (*reader)->Next(&line);
  ASSERT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_NE(over.status().message().find("s3://bucket/endless.jsonl: line 1 "),
            std::string::npos)
      << over.status();
  // Read (and so buffered) no more than the limit plus one read's worth.
  EXPECT_LE(endless->read_bytes, kLimit + 2 * 65536);
}

std::string JsonlText(int lines, int first = 0) {
  std::string text;
  for (int i = first; i < first + lines; ++i) {
    text += absl::StrCat(R"({"id": )", i, R"(, "input_ids": [)", i, ", ", i + 1, ", ", i * 7,
                         R"(], "text": "sample )", i, "\"}\n");
  }
  return text;
}

class JsonlShardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir(::testing::UnitTest::GetInstance()->current_test_info()->name());
    cache_ = dir_ + "/cache/nested";
  }
  absl::StatusOr<std::unique_ptr<JsonlShard>> Open(const std::string& name,
                                                   const std::string& field = "input_ids") {
    return JsonlShard::Open(dir_ + "/" + name, field, cache_);
  }
  std::string dir_, cache_;
};

std::vector<int32_t> Sample(const ShardReader& shard, uint64_t i) {
  std::vector<int32_t> out;
  EXPECT_TRUE(shard.AppendTokens(i, 0, shard.SampleLength(i), &out).ok());
  return out;
}

TEST_F(JsonlShardTest, ReadsPlainGzipAndZstdIdenticallyAndSkipsBlankLines) {
  const std::string text =
      "\xEF\xBB\xBF" + JsonlText(3) + "\n  \r\n" + JsonlText(2, 3) + R"({"input_ids": []})";
  for (const char* name : {"d.jsonl", "d.jsonl.gz", "d.jsonl.zst"}) {
    ASSERT_TRUE(WriteTextFile(dir_ + "/" + name, text).ok());
    auto shard = Open(name);
    ASSERT_TRUE(shard.ok()) << name << ": " << shard.status();
    ASSERT_EQ((*shard)->NumSamples(), 6u) << name;
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(Sample(**shard, i), (std::vector<int32_t>{i, i + 1, i * 7})) << name;
    }
    EXPECT_EQ((*shard)->SampleLength(5), 0u);
    std::vector<int32_t> part;
    ASSERT_TRUE((*shard)->AppendTokens(4, 1, 2, &part).ok());
    EXPECT_EQ(part, (std::vector<int32_t>{5, 28}));
    EXPECT_EQ((*shard)->FileName(), name);
    EXPECT_EQ((*shard)->ByteSize(), fs::file_size(dir_ + "/" + name));
  }
  struct stat st;
  ASSERT_EQ(stat(cache_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(JsonlShardTest, CorruptLineIsNamedWithFileLineAndOffset) {
  const std::string good = JsonlText(2);
  const std::string text = good + R"({"input_ids": [1, 2, x]})" + "\n" + JsonlText(1);
  for (const char* name : {"c.jsonl", "c.jsonl.gz", "c.jsonl.zst"}) {
    ASSERT_TRUE(WriteTextFile(dir_ + "/" + name, text).ok());
    auto shard = Open(name);
    ASSERT_FALSE(shard.ok()) << name;
    EXPECT_EQ(shard.status().code(), absl::StatusCode::kDataLoss);
    const std::string want =
        absl::StrCat(dir_, "/", name, ": line 3 (decompressed byte offset ", good.size() + 21,
                     "): malformed JSON: unexpected character: a missing or extra ',', ':', "
                     "brace, bracket or key, or a bare word");
    EXPECT_EQ(shard.status().message(), want);
  }
  // No partial cache is left behind.
  for (const auto& e : fs::directory_iterator(cache_)) ADD_FAILURE() << e.path();
}

TEST_F(JsonlShardTest, MissingFieldAndCustomFieldAreHandled) {
  ASSERT_TRUE(WriteTextFile(dir_ + "/f.jsonl", JsonlText(1) + R"({"tokens": [5]})" "\n").ok());
  auto missing = Open("f.jsonl");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("f.jsonl: line 2 (decompressed byte offset"),
            std::string::npos) << missing.status();
  EXPECT_NE(missing.status().message().find("missing field \"input_ids\""), std::string::npos);
  ASSERT_TRUE(WriteTextFile(dir_ + "/g.jsonl", R"({"tokens": [5, 6]})" "\n").ok());
  auto custom = Open("g.jsonl", "tokens");
  ASSERT_TRUE(custom.ok()) << custom.status();
  EXPECT_EQ(Sample(**custom, 0), (std::vector<int32_t>{5, 6}));
}

TEST_F(JsonlShardTest, TruncatedCompressedStreamsAreNamed) {
  for (const char* name : {"t.jsonl.gz", "t.jsonl.zst"}) {
    ASSERT_TRUE(WriteTextFile(dir_ + "/" + name, JsonlText(20000)).ok());
    Truncate(dir_ + "/" + name, 0.5);
    auto shard = Open(name);
    ASSERT_FALSE(shard.ok()) << name;
    EXPECT_EQ(shard.status().code(), absl::StatusCode::kDataLoss);
    const std::string msg(shard.status().message());
    EXPECT_EQ(msg.rfind(absl::StrCat(dir_, "/", name, ": line "), 0), 0u) << msg;
    EXPECT_NE(msg.find("decompressed byte offset"), std::string::npos) << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  }
  ASSERT_TRUE(WriteTextFile(dir_ + "/empty.jsonl.zst", "").ok());
  fs::resize_file(dir_ + "/empty.jsonl.zst", 0);
  EXPECT_NE(Open("empty.jsonl.zst").status().message().find("truncated zstd stream (empty file)"),
            std::string::npos);
}

TEST_F(JsonlShardTest, CacheIsReusedAndInvalidatedWhenTheSourceChanges) {
  const std::string path = dir_ + "/r.jsonl.zst";
  ASSERT_TRUE(WriteTextFile(path, JsonlText(10)).ok());
  auto first = Open("r.jsonl.zst");
  ASSERT_TRUE(first.ok()) << first.status();
  const std::string prefix = (*first)->cache_prefix();
  EXPECT_EQ(fs::path(prefix).parent_path(), fs::path(cache_));
  struct stat before, after;
  ASSERT_EQ(stat((prefix + ".off").c_str(), &before), 0);
  ASSERT_EQ(stat((prefix + ".tok").c_str(), &after), 0);
  EXPECT_EQ(after.st_size, 10 * 3 * 4);
  ASSERT_EQ(stat((prefix + ".off").c_str(), &before), 0);
  first->reset();

  auto second = Open("r.jsonl.zst");
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)->cache_prefix(), prefix);
  ASSERT_EQ(stat((prefix + ".off").c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);  // Not rewritten.
  EXPECT_EQ(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
  EXPECT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);

  // A changed source (new size and mtime) gets a new cache with the new content.
  ASSERT_TRUE(WriteTextFile(path, JsonlText(4, 100)).ok());
  fs::last_write_time(path, fs::last_write_time(path) + std::chrono::seconds(5));
  auto third = Open("r.jsonl.zst");
  ASSERT_TRUE(third.ok()) << third.status();
  EXPECT_NE((*third)->cache_prefix(), prefix);
  ASSERT_EQ((*third)->NumSamples(), 4u);
  EXPECT_EQ(Sample(**third, 0), (std::vector<int32_t>{100, 101, 700}));
  // The field is part of the key too.
  ASSERT_TRUE(WriteTextFile(dir_ + "/k.jsonl", R"({"a": [1], "b": [2, 3]})" "\n").ok());
  auto a = Open("k.jsonl", "a"), b = Open("k.jsonl", "b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->cache_prefix(), (*b)->cache_prefix());
  EXPECT_EQ(Sample(**b, 0), (std::vector<int32_t>{2, 3}));
}

TEST_F(JsonlShardTest, InconsistentCacheIsRebuilt) {
  ASSERT_TRUE(WriteTextFile(dir_ + "/x.jsonl", JsonlText(3)).ok());
  std::string prefix = Open("x.jsonl").value()->cache_prefix();
  fs::resize_file(prefix + ".tok", 4);  // Corrupt: offsets no longer match.
  auto again = Open("x.jsonl");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(Sample(**again, 2), (std::vector<int32_t>{2, 3, 14}));
}

proto::DatasetSpec Spec(const std::string& path, const std::string& format = "") {
  proto::DatasetSpec spec;
  spec.set_name("ds");
  spec.set_path(path);
  spec.set_format(format);
  return spec;
}

TEST_F(JsonlShardTest, DatasetsDetectJsonlInDirectoriesFilesAndGlobs) {
  ASSERT_TRUE(WriteTextFile(dir_ + "/b.jsonl.zst", JsonlText(2, 10)).ok());
  ASSERT_TRUE(WriteTextFile(dir_ + "/a.jsonl.gz", JsonlText(3)).ok());
  ASSERT_TRUE(WriteTextFile(dir_ + "/README", "not a shard").ok());
  OpenOptions options;
  options.cache_dir = cache_;
  auto ds = Dataset::Open(Spec(dir_), options);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->format(), "jsonl");
  ASSERT_EQ((*ds)->NumShards(), 2u);
  EXPECT_EQ((*ds)->shard(0).FileName(), "a.jsonl.gz");
  EXPECT_EQ((*ds)->NumSamples(), 5u);
  auto single = Dataset::Open(Spec(dir_ + "/b.jsonl.zst"), options);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ((*single)->format(), "jsonl");
  auto glob = Dataset::Open(Spec(dir_ + "/*.jsonl.*"), options);
  ASSERT_TRUE(glob.ok()) << glob.status();
  EXPECT_EQ((*glob)->Fingerprint(), (*ds)->Fingerprint());
  auto none = Dataset::Open(Spec(dir_ + "/*.parquet"), options);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find(dir_ + "/*.parquet"), std::string::npos);
}

TEST_F(JsonlShardTest, ATokenCacheBudgetPinsOpenShardsEvictsOthersAndRebuildsThem) {
  ASSERT_TRUE(WriteTextFile(dir_ + "/a.jsonl", JsonlText(50)).ok());
  ASSERT_TRUE(WriteTextFile(dir_ + "/b.jsonl", JsonlText(50, 1000)).ok());
  constexpr uint64_t kEntryBytes = 50 * 3 * 4 + 51 * 8;  // .tok + .off
  auto cache = TokenCache::Create(cache_, kEntryBytes + kEntryBytes / 2);
  ASSERT_TRUE(cache.ok()) << cache.status();
  OpenOptions options;
  options.cache_dir = dir_ + "/unused";  // the token cache's directory wins
  options.token_cache = *cache;
  auto open = [&](const char* name) {
    auto ds = Dataset::Open(Spec(dir_ + "/" + name), options);
    EXPECT_TRUE(ds.ok()) << ds.status();
    return *std::move(ds);
  };
  auto a = open("a.jsonl");
  const std::string a_off =
      static_cast<const JsonlShard&>(a->shard(0)).cache_prefix() + ".off";
  EXPECT_EQ(fs::path(a_off).parent_path(), fs::path(cache_));
  TokenCacheStats s = (*cache)->Stats();
  EXPECT_EQ(s.misses, 1u);
  EXPECT_EQ(s.bytes_built, kEntryBytes);
  EXPECT_EQ(s.pinned_bytes, kEntryBytes);
  a.reset();
  a = open("a.jsonl");
  EXPECT_EQ((*cache)->Stats().hits, 1u);
  a.reset();
  // b does not fit beside a, which nobody holds: a goes.
  auto b = open("b.jsonl");
  s = (*cache)->Stats();
  EXPECT_EQ(s.misses, 2u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_FALSE(fs::exists(a_off));
  // a again, while b is held: rebuilt with the same samples, both kept (over budget).
  a = open("a.jsonl");
  s = (*cache)->Stats();
  EXPECT_EQ(s.misses, 3u);
  EXPECT_TRUE(s.over_budget);
  EXPECT_EQ(s.bytes, 2 * kEntryBytes);
  EXPECT_EQ(Sample(a->shard(0), 5), (std::vector<int32_t>{5, 6, 35}));
  EXPECT_EQ(Sample(b->shard(0), 5), (std::vector<int32_t>{1005, 1006, 7035}));
  b.reset();
  s = (*cache)->Stats();
  EXPECT_FALSE(s.over_budget);
  EXPECT_EQ(s.evictions, 2u);
  EXPECT_EQ(s.entries, 1u);
  EXPECT_FALSE(fs::exists(dir_ + "/unused"));
}

TEST_F(JsonlShardTest, ALineOverTheConfiguredLimitFailsTheDatasetNamingFileAndLine) {
  for (const char* name : {"long.jsonl.gz", "long.jsonl.zst"}) {
    std::string text = JsonlText(2);
    text += R"({"input_ids": [)";
    for (int i = 0; i < 3000; ++i) text += "12345, ";
    text += "1]}\n";
    text += JsonlText(1, 3);
    ASSERT_TRUE(WriteTextFile(dir_ + "/" + name, text).ok());
    OpenOptions options;
    options.cache_dir = cache_;
    options.max_jsonl_line_bytes = 4096;
    auto ds = Dataset::Open(Spec(dir_ + "/" + name), options);
    ASSERT_EQ(ds.status().code(), absl::StatusCode::kResourceExhausted) << ds.status();
    EXPECT_NE(ds.status().message().find(dir_ + "/" + name + ": line 3 "), std::string::npos)
        << ds.status();
    // The default limit (64 MiB) takes the same file.
    options.max_jsonl_line_bytes = kDefaultMaxLineBytes;
    auto fine = Dataset::Open(Spec(dir_ + "/" + name), options);
    ASSERT_TRUE(fine.ok()) << fine.status();
    EXPECT_EQ((*fine)->NumSamples(), 4u);
  }
}

}  // namespace
}  // namespace zephon::pipeline
