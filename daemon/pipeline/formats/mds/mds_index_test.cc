#include "daemon/pipeline/formats/mds/mds_index.h"

#include <string>

#include "absl/strings/str_replace.h"
#include "daemon/pipeline/formats/mds/mds_test_util.h"
#include "daemon/pipeline/formats/shard_file.h"
#include "gtest/gtest.h"

namespace zephon::pipeline::mds {
namespace {

using testing::Has;
using testing::ReadTestdata;

TEST(MdsIndexTest, ReadsWhatStreamingsWriterWrites) {
  const std::string json = ReadTestdata("zstd/index.json");
  ASSERT_FALSE(json.empty());
  const auto file = MemoryShardFile("zstd/index.json", json);
  const absl::StatusOr<MdsIndex> index = OpenMdsIndex(*file);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(index->samples, 3u);
  ASSERT_EQ(index->shards.size(), 1u);
  EXPECT_EQ(index->checksum.size(), 64u);
  const MdsShardInfo& shard = index->shards[0];
  EXPECT_EQ(shard.compression, MdsCompression::kZstd);
  EXPECT_EQ(shard.stored().basename, "shard.00000.mds.zstd");
  EXPECT_EQ(shard.raw_data.basename, "shard.00000.mds");
  ASSERT_EQ(shard.columns.size(), 4u);  // sorted by name, as the writer sorts them
  EXPECT_EQ(shard.columns[0].name, "any");
  EXPECT_EQ(shard.columns[2].name, "n");
  EXPECT_EQ(shard.columns[2].size, 8u);
  EXPECT_EQ(shard.columns[1].encoding.dtype, MdsDtype::kUint16);
  EXPECT_FALSE(shard.columns[3].size.has_value());
  ASSERT_EQ(shard.raw_data.hashes.size(), 2u);
  EXPECT_EQ(shard.raw_data.hashes[0].first, "sha1");
  EXPECT_NE(shard.Column("text"), nullptr);
  EXPECT_EQ(shard.Column("nope"), nullptr);
}

absl::StatusOr<MdsIndex> Edited(const std::string& from, const std::string& to) {
  const std::string json = absl::StrReplaceAll(ReadTestdata("zstd/index.json"), {{from, to}});
  return ParseMdsIndex("ds/index.json", json);
}

TEST(MdsIndexTest, ErrorsNameTheFileAndJsonPath) {
  auto r = Edited("\"samples\": 3", "\"samples\": \"3\"");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(r.status().message(), "ds/index.json: shards[0].samples is not")) << r.status();
  r = Edited("\"raw_data\": {\"basename\"", "\"raw_data\": {\"basenam\"");
  EXPECT_TRUE(Has(r.status().message(), "shards[0].raw_data.basename is missing")) << r.status();
  r = Edited("\"basename\": \"shard.00000.mds\"", "\"basename\": \"../etc/passwd\"");
  EXPECT_TRUE(Has(r.status().message(), "not a path inside")) << r.status();
  r = Edited("\"column_sizes\": [null, null, 8, null]", "\"column_sizes\": [null, null, 4, null]");
  EXPECT_TRUE(Has(r.status().message(), "column_sizes[2]")) << r.status();
  r = ParseMdsIndex("x.json", "{\"version\": 2, \"shards\": [");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(r.status().message(), "x.json is not valid JSON")) << r.status();
  r = Edited("\"zip_data\": {", "\"zip_data\": null, \"zip_dat\": {");
  EXPECT_TRUE(Has(r.status().message(), "has compression \"zstd\" but no zip_data"))
      << r.status();
}

TEST(MdsIndexTest, UnsupportedThingsAreUnimplementedNamingTheShard) {
  auto r = Edited("\"compression\": \"zstd\"", "\"compression\": \"lzma\"");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Has(r.status().message(), "shards[0]: compression \"lzma\"")) << r.status();
  r = Edited("\"format\": \"mds\"", "\"format\": \"json\"");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  r = Edited("\"ndarray:uint16\"", "\"ndarray:complex64\"");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Has(r.status().message(), "column \"ids\"")) << r.status();
  r = ParseMdsIndex("x.json", "{\"version\": 1, \"shards\": []}");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
}

TEST(MdsIndexTest, ShardPathsAreBesideTheIndex) {
  const auto index = ParseMdsIndex("ds/index.json", ReadTestdata("zstd/index.json"));
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_EQ(MdsShardPath("s3://b/ds/index.json", index->shards[0]),
            "s3://b/ds/shard.00000.mds.zstd");
  EXPECT_EQ(MdsShardPath("index.json", index->shards[0]), "shard.00000.mds.zstd");
  const auto merged = Edited("\"basename\": \"shard.00000.mds.zstd\"",
                             "\"basename\": \"part1/shard.00000.mds.zstd\"");
  ASSERT_TRUE(merged.ok()) << merged.status();
  EXPECT_EQ(MdsShardPath("/d/index.json", merged->shards[0]), "/d/part1/shard.00000.mds.zstd");
}

TEST(MdsIndexTest, CompressionLevelsAndFamilies) {
  for (const auto& [text, c] : {std::pair<std::string, MdsCompression>{"zstd:19",
                                                                       MdsCompression::kZstd},
                                {"gz:1", MdsCompression::kGzip},
                                {"bz2", MdsCompression::kBzip2},
                                {"br:11", MdsCompression::kBrotli}}) {
    auto r = Edited("\"compression\": \"zstd\"", "\"compression\": \"" + text + "\"");
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->shards[0].compression, c);
  }
}

}  // namespace
}  // namespace zephon::pipeline::mds
