// The record-format table (record_formats.h) and Dataset::Open over a record format:
// a test-only format ("memrec": one record a line, "ids:1 2 3", "text:...", "null")
// registered here stands for Parquet and MDS, whose rooms register their own entries.
#include "daemon/pipeline/formats/record_formats.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/mix.h"
#include "daemon/pipeline/formats/dataset.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "tokenizer/tiny_tokenizer_testing.h"
#include "tokenizer/tokenizer.h"

namespace zephon::pipeline {
namespace {

using testing::MakeTempDir;
using testing::WriteTextFile;
using Ids = std::vector<int32_t>;

std::atomic<int> g_opens{0};

// The records of a .memrec file, all read at open.
class MemrecSource final : public RecordSource {
 public:
  MemrecSource(std::string path, std::vector<std::string> lines, RecordField field)
      : path_(std::move(path)), lines_(std::move(lines)), field_(std::move(field)) {}

  absl::StatusOr<bool> Next(Value* value) override {
    if (next_ >= lines_.size()) return false;
    const std::string& line = lines_[next_++];
    *value = Value();
    if (line == "null") return true;
    if (field_.kind == RecordField::Kind::kText) {
      value->kind = Value::Kind::kText;
      value->text = std::string_view(line).substr(5);
      return true;
    }
    ids_.clear();
    const std::vector<std::string> words = absl::StrSplit(line.substr(4), ' ', absl::SkipEmpty());
    for (const std::string& t : words) {
      int32_t v = 0;
      if (!absl::SimpleAtoi(t, &v)) return absl::DataLossError(absl::StrCat(Where(), ": bad id"));
      ids_.push_back(v);
    }
    value->kind = Value::Kind::kTokens;
    value->tokens = ids_;
    return true;
  }
  std::optional<uint64_t> NumRecords() const override { return lines_.size(); }
  std::string Where() const override { return absl::StrCat(path_, " record ", next_ - 1); }

 private:
  const std::string path_;
  const std::vector<std::string> lines_;
  const RecordField field_;
  size_t next_ = 0;
  Ids ids_;
};

absl::StatusOr<std::string> ReadAll(const ShardFile& file) {
  std::string bytes(file.size(), '\0');
  if (absl::Status s = file.ReadAt(0, bytes.size(), bytes.data()); !s.ok()) return s;
  return bytes;
}

RecordFormat Memrec() {
  RecordFormat f;
  f.name = "memrec";
  f.is_shard_name = [](std::string_view name) {
    return name.size() > 7 && name.substr(name.size() - 7) == ".memrec";
  };
  f.open = [](std::unique_ptr<ShardFile> file, const RecordShardRef& ref,
              const RecordField& field) -> absl::StatusOr<std::unique_ptr<RecordSource>> {
    ++g_opens;
    absl::StatusOr<std::string> bytes = ReadAll(*file);
    if (!bytes.ok()) return bytes.status();
    std::vector<std::string> lines = absl::StrSplit(*bytes, '\n', absl::SkipEmpty());
    return std::unique_ptr<RecordSource>(new MemrecSource(ref.path, std::move(lines), field));
  };
  // A format checksum: here the whole (small) file's hash.
  f.checksum = [](const ShardFile& file, const RecordShardRef&) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::string> bytes = ReadAll(file);
    if (!bytes.ok()) return bytes.status();
    return absl::StrCat(HashBytes(*bytes));
  };
  return f;
}

class RecordFormatsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(RecordFormats::Global().Register(Memrec()).ok());
  }
  void SetUp() override {
    dir_ = MakeTempDir("record_formats_test");
    options_.cache_dir = dir_ + "/cache";
  }

  std::string WriteShards(const std::string& sub, const std::vector<std::string>& contents) {
    const std::string d = dir_ + "/" + sub;
    std::filesystem::create_directories(d);
    for (size_t i = 0; i < contents.size(); ++i) {
      EXPECT_TRUE(WriteTextFile(absl::StrCat(d, "/part-", i, ".memrec"), contents[i]).ok());
    }
    EXPECT_TRUE(WriteTextFile(d + "/README.txt", "not a shard").ok());
    return d;
  }

  proto::DatasetSpec Spec(const std::string& path, const std::string& format = "memrec") {
    proto::DatasetSpec spec;
    spec.set_name("recs");
    spec.set_path(path);
    spec.set_format(format);
    return spec;
  }

  std::string dir_;
  OpenOptions options_;
};

TEST_F(RecordFormatsTest, ADirectoryOpensItsShardsInNameOrderNullsSkippedAndCounted) {
  const std::string d = WriteShards("a", {"ids:1 2\nnull\nids:3\n", "ids:4 5 6\n"});
  const int opens = g_opens.load();
  auto ds = Dataset::Open(Spec(d), options_);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->format(), "memrec");
  ASSERT_EQ((*ds)->NumShards(), 2u);
  EXPECT_EQ((*ds)->shard(0).FileName(), "part-0.memrec");
  EXPECT_EQ((*ds)->NumSamples(), 3u);
  Ids got;
  ASSERT_TRUE((*ds)->AppendTokens(1, 0, 0, 3, &got).ok());
  EXPECT_EQ(got, (Ids{4, 5, 6}));
  EXPECT_FALSE((*ds)->is_text());
  ASSERT_TRUE((*ds)->has_conversion_stats());
  EXPECT_EQ((*ds)->TextStats().null_records, 1u);
  EXPECT_EQ((*ds)->TextStats().records, 4u);
  EXPECT_TRUE((*ds)->ShardTextStats(0)->tokenized);
  EXPECT_EQ(g_opens.load(), opens + 2);
  // A second open is served by the token cache: no record is read.
  auto again = Dataset::Open(Spec(d), options_);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(g_opens.load(), opens + 2);
  EXPECT_FALSE((*again)->ShardTextStats(0)->tokenized);
  EXPECT_EQ((*again)->TextStats().null_records, 1u);
  EXPECT_EQ((*again)->Fingerprint(), (*ds)->Fingerprint());
}

TEST_F(RecordFormatsTest, AutoDetectionFindsTheFormatFromShardNames) {
  const std::string d = WriteShards("auto", {"ids:1\n"});
  auto ds = Dataset::Open(Spec(d, ""), options_);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->format(), "memrec");
  auto single = Dataset::Open(Spec(d + "/part-0.memrec", ""), options_);
  ASSERT_TRUE(single.ok()) << single.status();
  EXPECT_EQ((*single)->format(), "memrec");
}

TEST_F(RecordFormatsTest, FingerprintCoversTheFormatChecksum) {
  // Same names, sizes and sample counts; different ids, so a different checksum.
  auto a = Dataset::Open(Spec(WriteShards("fa", {"ids:1 2\n"})), options_);
  auto b = Dataset::Open(Spec(WriteShards("fb", {"ids:1 3\n"})), options_);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE((*a)->Fingerprint(), (*b)->Fingerprint());
  auto c = Dataset::Open(Spec(WriteShards("fc", {"ids:1 2\n"})), options_);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*a)->Fingerprint(), (*c)->Fingerprint());  // location-independent
}

TEST_F(RecordFormatsTest, OnNullErrorFailsTheOpenNamingTheRecord) {
  proto::DatasetSpec spec = Spec(WriteShards("err", {"ids:1\nnull\n"}));
  spec.set_on_null(proto::DatasetSpec::ERROR);
  auto ds = Dataset::Open(spec, options_);
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ds.status().message().find("part-0.memrec record 1"), std::string::npos)
      << ds.status();
}

TEST_F(RecordFormatsTest, OnNullOnAFormatWithoutNullsIsRefused) {
  const std::string path = dir_ + "/a.jsonl";
  ASSERT_TRUE(WriteTextFile(path, "{\"input_ids\": [1]}\n").ok());
  proto::DatasetSpec spec = Spec(path, "jsonl");
  spec.set_on_null(proto::DatasetSpec::SKIP);
  auto ds = Dataset::Open(spec, options_);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("on_null applies to record formats (mds, memrec, parquet)"),
            std::string::npos)
      << ds.status();
}

TEST_F(RecordFormatsTest, JsonlReadsTheGenericFieldToo) {
  const std::string path = dir_ + "/b.jsonl";
  ASSERT_TRUE(WriteTextFile(path, "{\"ids\": [7, 8]}\n").ok());
  proto::DatasetSpec spec = Spec(path, "jsonl");
  spec.set_field("ids");
  auto ds = Dataset::Open(spec, options_);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->SampleLength(0, 0), 2u);
}

TEST_F(RecordFormatsTest, TextColumnsAreTokenized) {
  auto tok = tokenizer::Tokenizer::FromJson(tokenizer::kTinyLlama2Json, {});
  ASSERT_TRUE(tok.ok()) << tok.status();
  TextTokenization text;
  text.tokenizer = std::shared_ptr<const tokenizer::Tokenizer>(*std::move(tok));
  text.special_tokens = tokenizer::SpecialTokens::kNone;
  auto ds = Dataset::Open(Spec(WriteShards("text", {"text:hello world\nnull\ntext:world\n"})),
                          options_, &text);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_TRUE((*ds)->is_text());
  ASSERT_EQ((*ds)->NumSamples(), 2u);
  Ids got;
  ASSERT_TRUE((*ds)->AppendTokens(0, 1, 0, (*ds)->SampleLength(0, 1), &got).ok());
  EXPECT_EQ(got, *text.tokenizer->Encode("world", tokenizer::SpecialTokens::kNone));
  EXPECT_EQ((*ds)->TextStats().null_records, 1u);
}

TEST_F(RecordFormatsTest, AnUnknownFormatListsTheRegisteredOnes) {
  auto ds = Dataset::Open(Spec(dir_, "avro"), options_);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("unknown (megatron, flat, jsonl, mds, memrec, parquet)"),
            std::string::npos)
      << ds.status();
}

TEST_F(RecordFormatsTest, ADirectoryWithoutShardsNamesTheFormat) {
  std::filesystem::create_directories(dir_ + "/empty");
  ASSERT_TRUE(WriteTextFile(dir_ + "/empty/x.txt", "x").ok());
  auto ds = Dataset::Open(Spec(dir_ + "/empty"), options_);
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("holds no memrec shard"), std::string::npos)
      << ds.status();
}

TEST_F(RecordFormatsTest, RegistrationRefusesDuplicatesBuiltinsAndIncompleteEntries) {
  EXPECT_EQ(RecordFormats::Global().Register(Memrec()).code(),
            absl::StatusCode::kAlreadyExists);
  RecordFormat jsonl = Memrec();
  jsonl.name = "jsonl";
  EXPECT_EQ(RecordFormats::Global().Register(jsonl).code(), absl::StatusCode::kInvalidArgument);
  RecordFormat incomplete = Memrec();
  incomplete.name = "other";
  incomplete.checksum = nullptr;
  EXPECT_EQ(RecordFormats::Global().Register(incomplete).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RecordFormats::Global().Find("other"), nullptr);
  ASSERT_NE(RecordFormats::Global().Find("memrec"), nullptr);
}

}  // namespace
}  // namespace zephon::pipeline
