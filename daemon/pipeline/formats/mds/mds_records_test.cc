#include "daemon/pipeline/formats/mds/mds_records.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_replace.h"
#include "daemon/pipeline/formats/mds/mds_hash.h"
#include "daemon/pipeline/formats/mds/mds_index.h"
#include "daemon/pipeline/formats/mds/mds_test_util.h"
#include "daemon/pipeline/formats/shard_file.h"
#include "gtest/gtest.h"

namespace zephon::pipeline::mds {
namespace {

using testing::Has;
using testing::ReadTestdata;


// Opens testdata/<dir>'s only shard, with the index and shard bytes as given.
absl::StatusOr<std::unique_ptr<RecordSource>> Open(const std::string& index_json,
                                                   const std::string& shard_bytes,
                                                   const std::string& field,
                                                   RecordField::Kind kind) {
  absl::StatusOr<MdsIndex> index = ParseMdsIndex("ds/index.json", index_json);
  if (!index.ok()) return index.status();
  RecordField f;
  f.name = field;
  f.kind = kind;
  return OpenMdsRecords(index->shards[0],
                        MemoryShardFile("ds/" + index->shards[0].stored().basename, shard_bytes),
                        f);
}

std::vector<std::string> Texts(RecordSource& s) {
  std::vector<std::string> out;
  RecordSource::Value v;
  while (*s.Next(&v)) {
    EXPECT_EQ(v.kind, RecordSource::Value::Kind::kText);
    out.emplace_back(v.text);
  }
  return out;
}

TEST(MdsRecordsTest, TextAndTokensFromPlainAndZstdShards) {
  for (const std::string dir : {"plain", "zstd"}) {
    const std::string index = ReadTestdata(dir + "/index.json");
    const std::string shard =
        ReadTestdata(dir == "plain" ? "plain/shard.00000.mds" : "zstd/shard.00000.mds.zstd");
    auto text = Open(index, shard, "text", RecordField::Kind::kText);
    ASSERT_TRUE(text.ok()) << text.status();
    EXPECT_EQ((*text)->NumRecords(), 3u);
    EXPECT_EQ(Texts(**text), (std::vector<std::string>{"hello", "", "h\xc3\xa9llo w\xc3\xb6rld"}));

    for (const auto& [column, expected] :
         {std::pair<std::string, std::vector<std::vector<int32_t>>>{
              "ids", {{1, 2, 3}, {65535}, {4, 5}}},
          {"any", {{7, 8}, {9}, {10, 11, 12}}}}) {
      auto tokens = Open(index, shard, column, RecordField::Kind::kTokens);
      ASSERT_TRUE(tokens.ok()) << tokens.status();
      RecordSource::Value v;
      for (const auto& want : expected) {
        ASSERT_TRUE(*(*tokens)->Next(&v));
        EXPECT_EQ(v.kind, RecordSource::Value::Kind::kTokens);
        EXPECT_EQ(std::vector<int32_t>(v.tokens.begin(), v.tokens.end()), want) << column;
      }
      EXPECT_FALSE(*(*tokens)->Next(&v));
      EXPECT_EQ((*tokens)->Where(), "ds/shard.00000.mds" + std::string(dir == "zstd" ? ".zstd" : "") +
                                        ": sample 2");
    }
  }
}

TEST(MdsRecordsTest, MissingColumnListsTheColumns) {
  auto r = Open(ReadTestdata("plain/index.json"), ReadTestdata("plain/shard.00000.mds"), "txt",
                RecordField::Kind::kText);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(r.status().message(), "no column \"txt\"; its columns: \"any\", \"ids\", \"n\", "
                                        "\"text\""))
      << r.status();
  r = Open(ReadTestdata("plain/index.json"), ReadTestdata("plain/shard.00000.mds"), "n",
           RecordField::Kind::kTokens);
  EXPECT_TRUE(Has(r.status().message(), "column \"n\" has encoding \"int\"")) << r.status();
  r = Open(ReadTestdata("plain/index.json"), ReadTestdata("plain/shard.00000.mds"), "ids",
           RecordField::Kind::kText);
  EXPECT_TRUE(Has(r.status().message(), "token ids, not text")) << r.status();
}

void ExpectDataLoss(const absl::StatusOr<std::unique_ptr<RecordSource>>& r,
                    absl::string_view part) {
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_TRUE(Has(r.status().message(), part)) << r.status();
}

TEST(MdsRecordsTest, TruncatedOrFlippedShardIsDataLoss) {
  const std::string index = ReadTestdata("plain/index.json");
  std::string shard = ReadTestdata("plain/shard.00000.mds");
  ExpectDataLoss(Open(index, shard.substr(0, shard.size() - 2), "text", RecordField::Kind::kText),
                 "ds/shard.00000.mds has 407 bytes but the index ds/index.json says 409");
  shard[shard.size() - 1] ^= 1;  // the last byte of "wörld": sha1 differs
  ExpectDataLoss(Open(index, shard, "text", RecordField::Kind::kText),
                 "ds/shard.00000.mds: sha1 is ");
}

TEST(MdsRecordsTest, CompressedShardOfTheWrongSizeIsDataLoss) {
  const std::string index = ReadTestdata("zstd/index.json");
  const std::string shard = ReadTestdata("zstd/shard.00000.mds.zstd");
  // The index says the raw shard (411 bytes) is 10 bytes shorter / longer.
  for (const auto& [from, to, part] :
       {std::tuple<std::string, std::string, std::string>{"\"bytes\": 411", "\"bytes\": 401",
                                                          "decompresses to more than 402"},
        {"\"bytes\": 411", "\"bytes\": 421", "decompresses to 411 bytes"}}) {
    ExpectDataLoss(Open(absl::StrReplaceAll(index, {{from, to}}), shard, "text",
                        RecordField::Kind::kText),
                   part);
  }
  // A compressed byte flipped (the zstd hashes dropped so that decoding meets it).
  std::string edited = index;
  for (const char* algo : {"sha1", "xxh64"}) {
    const size_t zip = edited.find("\"zip_data\"");
    const size_t at = edited.find(std::string("\"") + algo + "\"", edited.find("\"hashes\"", zip));
    edited.replace(at + 1, 1, "_");
  }
  std::string bad = shard;
  bad[bad.size() / 2] ^= 0x55;
  auto r = Open(edited, bad, "text", RecordField::Kind::kText);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << r.status();
  EXPECT_TRUE(Has(r.status().message(), "ds/shard.00000.mds.zstd")) << r.status();
}

TEST(MdsHashTest, KnownAndUnknownAlgorithms) {
  EXPECT_EQ(*MdsHashHex("sha1", "abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
  EXPECT_EQ(*MdsHashHex("md5", ""), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(*MdsHashHex("xxh64", ""), "ef46db3751d8e999");
  EXPECT_EQ(*MdsHashHex("xxh32", ""), "02cc5d05");
  EXPECT_FALSE(MdsHashHex("whirlpool-ish", "").has_value());
  // Unknown algorithms are skipped (and logged once), known ones still checked.
  EXPECT_TRUE(VerifyMdsHashes("f", "abc", {{"whirlpool-ish", "00"}}).ok());
  EXPECT_EQ(VerifyMdsHashes("f", "abc", {{"whirlpool-ish", "00"}, {"md5", "00"}}).code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace zephon::pipeline::mds
