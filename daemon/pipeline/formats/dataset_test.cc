#include "daemon/pipeline/formats/dataset.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "daemon/pipeline/formats/megatron_reader.h"
#include "daemon/pipeline/formats/testing_corpus.h"

namespace zephon::pipeline {
namespace {

using testing::MakeTempDir;
using testing::WriteFlatFile;
using testing::WriteMegatronShard;

const std::vector<std::vector<int32_t>> kDocs = {{1, 2, 3}, {}, {4, 5}, {6, 7, 8, 9}};

std::vector<int32_t> Tokens(const Dataset& ds, uint32_t shard, uint64_t index) {
  std::vector<int32_t> out;
  EXPECT_TRUE(ds.AppendTokens(shard, index, 0, ds.SampleLength(shard, index), &out).ok());
  return out;
}

proto::DatasetSpec Spec(const std::string& path, const std::string& format = "") {
  proto::DatasetSpec spec;
  spec.set_name("d");
  spec.set_path(path);
  spec.set_format(format);
  return spec;
}

TEST(DatasetTest, ReadsAMegatronPrefixForEveryIntegerDtype) {
  for (uint8_t code : {1, 2, 3, 4, 5, 8}) {
    const std::string dir = MakeTempDir("megatron_dtype");
    ASSERT_TRUE(WriteMegatronShard(dir + "/part", kDocs, code).ok());
    auto ds = Dataset::Open(Spec(dir + "/part"));
    ASSERT_TRUE(ds.ok()) << ds.status();
    EXPECT_EQ((*ds)->format(), "megatron");
    ASSERT_EQ((*ds)->NumSamples(), 4u);
    EXPECT_EQ((*ds)->SampleLength(0, 1), 0u);
    EXPECT_EQ(Tokens(**ds, 0, 3), kDocs[3]) << "dtype " << int(code);
    std::vector<int32_t> piece;
    ASSERT_TRUE((*ds)->AppendTokens(0, 3, 1, 2, &piece).ok());
    EXPECT_EQ(piece, (std::vector<int32_t>{7, 8}));
  }
}

TEST(DatasetTest, MegatronDirectoryShardsAreSortedByName) {
  const std::string dir = MakeTempDir("megatron_dir");
  ASSERT_TRUE(WriteMegatronShard(dir + "/b", {{20}}).ok());
  ASSERT_TRUE(WriteMegatronShard(dir + "/a", {{10}, {11}}).ok());
  auto ds = Dataset::Open(Spec(dir));
  ASSERT_TRUE(ds.ok()) << ds.status();
  ASSERT_EQ((*ds)->NumShards(), 2u);
  EXPECT_EQ((*ds)->shard(0).FileName(), "a.bin");
  EXPECT_EQ(Tokens(**ds, 1, 0), (std::vector<int32_t>{20}));
}

TEST(DatasetTest, UnpairedMegatronFileIsNamed) {
  const std::string dir = MakeTempDir("megatron_unpaired");
  ASSERT_TRUE(WriteMegatronShard(dir + "/a", {{1}}).ok());
  std::filesystem::remove(dir + "/a.bin");
  auto ds = Dataset::Open(Spec(dir, "megatron"));
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("a.idx"), std::string::npos) << ds.status();
}

TEST(DatasetTest, LoneBinIsAMissingIndexUnlessFormatIsFlat) {
  const std::string dir = MakeTempDir("lone_bin");
  ASSERT_TRUE(WriteFlatFile(dir + "/train.bin", std::vector<uint32_t>(64, 7)).ok());
  for (const std::string& path : {dir, dir + "/train.bin", dir + "/*.bin"}) {
    for (const char* format : {"", "megatron"}) {
      auto ds = Dataset::Open(Spec(path, format));
      ASSERT_FALSE(ds.ok()) << path << " format '" << format << "'";
      EXPECT_NE(ds.status().message().find("train.idx"), std::string::npos)
          << path << ": " << ds.status();
    }
  }
  proto::DatasetSpec flat_spec = Spec(dir, "flat");
  flat_spec.set_flat_sample_tokens(16);
  auto flat = Dataset::Open(flat_spec);
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ((*flat)->format(), "flat");
}

std::string Corrupt(const std::string& name, size_t offset, char value, size_t truncate_to) {
  const std::string dir = MakeTempDir(name);
  EXPECT_TRUE(WriteMegatronShard(dir + "/p", kDocs).ok());
  const std::string idx = dir + "/p.idx";
  std::string bytes;
  {
    std::ifstream f(idx, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(f), {});
  }
  if (offset < bytes.size()) bytes[offset] = value;
  if (truncate_to < bytes.size()) bytes.resize(truncate_to);
  std::ofstream(idx, std::ios::binary | std::ios::trunc).write(bytes.data(), bytes.size());
  auto ds = MegatronShard::Open(dir + "/p");
  EXPECT_FALSE(ds.ok());
  const std::string msg(ds.status().message());
  EXPECT_NE(msg.find("p.idx"), std::string::npos) << msg;
  return msg;
}

TEST(MegatronShardTest, CorruptIndexErrorsNameTheFileAndTheProblem) {
  EXPECT_NE(Corrupt("bad_magic", 0, 'X', ~size_t{0}).find("magic"), std::string::npos);
  EXPECT_NE(Corrupt("bad_version", 9, 2, ~size_t{0}).find("version"), std::string::npos);
  EXPECT_NE(Corrupt("bad_dtype", 17, 7, ~size_t{0}).find("dtype"), std::string::npos);
  EXPECT_NE(Corrupt("short_header", 99, 0, 20).find("truncated"), std::string::npos);
  EXPECT_NE(Corrupt("short_body", 99, 0, 40).find("truncated"), std::string::npos);
  // The size of sequence 3 (offset 34 + 12) is made too large for the .bin.
  EXPECT_NE(Corrupt("bad_size", 34 + 12, 100, ~size_t{0}).find("sequence 3"), std::string::npos);
}

TEST(MegatronShardTest, TruncatedBinIsRejected) {
  const std::string dir = MakeTempDir("short_bin");
  ASSERT_TRUE(WriteMegatronShard(dir + "/p", kDocs).ok());
  std::filesystem::resize_file(dir + "/p.bin", 10);
  auto ds = MegatronShard::Open(dir + "/p");
  ASSERT_FALSE(ds.ok());
  EXPECT_NE(ds.status().message().find("p.bin"), std::string::npos) << ds.status();
}

TEST(DatasetTest, FlatFilesAreCutIntoSamplesWithAShortTail) {
  const std::string dir = MakeTempDir("flat");
  ASSERT_TRUE(WriteFlatFile(dir + "/x.tok", {1, 2, 3, 4, 5, 6, 7}).ok());
  ASSERT_TRUE(WriteFlatFile(dir + "/y.bin", {70000, 8}, /*uint32=*/true).ok());
  proto::DatasetSpec spec = Spec(dir + "/x.tok");
  spec.set_flat_sample_tokens(3);
  auto ds = Dataset::Open(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->format(), "flat");
  ASSERT_EQ((*ds)->NumSamples(), 3u);
  EXPECT_EQ(Tokens(**ds, 0, 2), (std::vector<int32_t>{7}));
  EXPECT_EQ(Tokens(**ds, 0, 1), (std::vector<int32_t>{4, 5, 6}));

  proto::DatasetSpec wide = Spec(dir + "/y.bin", "flat");
  wide.set_dtype("uint32");
  auto ds32 = Dataset::Open(wide);
  ASSERT_TRUE(ds32.ok()) << ds32.status();
  EXPECT_EQ(Tokens(**ds32, 0, 0), (std::vector<int32_t>{70000, 8}));
}

TEST(DatasetTest, EmptyInputsAreClearErrors) {
  const std::string dir = MakeTempDir("empty");
  auto none = Dataset::Open(Spec(dir));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no shards"), std::string::npos) << none.status();
  ASSERT_TRUE(WriteFlatFile(dir + "/z", {}).ok());
  auto zero = Dataset::Open(Spec(dir));
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("zero samples"), std::string::npos) << zero.status();
  proto::DatasetSpec odd = Spec(dir + "/z", "flat");
  odd.set_dtype("float32");
  EXPECT_FALSE(Dataset::Open(odd).ok());
}

TEST(DatasetTest, GlobsSelectShardsForEveryFormatSortedByPath) {
  const std::string dir = MakeTempDir("glob");
  std::filesystem::create_directories(dir + "/m1");
  std::filesystem::create_directories(dir + "/m2");
  ASSERT_TRUE(WriteMegatronShard(dir + "/m2/shard-0", {{20}}).ok());
  ASSERT_TRUE(WriteMegatronShard(dir + "/m1/shard-1", {{10}, {11}}).ok());
  ASSERT_TRUE(WriteMegatronShard(dir + "/m1/other", {{99}}).ok());
  ASSERT_TRUE(WriteFlatFile(dir + "/m1/shard-notes", {1, 2}).ok());
  // "shard-*" matches .bin, .idx and a non-megatron file (ignored); ".bin"/".idx"
  // patterns select the same prefixes.
  uint64_t fingerprint = 0;
  for (const char* pattern : {"/m*/shard-*", "/m*/shard-*.bin", "/m?/shard-[0-9].idx"}) {
    auto ds = Dataset::Open(Spec(dir + pattern));
    ASSERT_TRUE(ds.ok()) << pattern << ": " << ds.status();
    EXPECT_EQ((*ds)->format(), "megatron") << pattern;
    ASSERT_EQ((*ds)->NumShards(), 2u) << pattern;
    EXPECT_EQ(Tokens(**ds, 0, 1), (std::vector<int32_t>{11})) << pattern;  // m1 < m2.
    EXPECT_EQ(Tokens(**ds, 1, 0), (std::vector<int32_t>{20})) << pattern;
    if (fingerprint == 0) fingerprint = (*ds)->Fingerprint();
    EXPECT_EQ((*ds)->Fingerprint(), fingerprint) << pattern;
  }
  // A glob matching only one side of a pair names the missing partner.
  std::filesystem::remove(dir + "/m2/shard-0.idx");
  auto unpaired = Dataset::Open(Spec(dir + "/m*/shard-*.bin", "megatron"));
  ASSERT_FALSE(unpaired.ok());
  EXPECT_NE(unpaired.status().message().find("shard-0.idx"), std::string::npos)
      << unpaired.status();

  ASSERT_TRUE(WriteFlatFile(dir + "/f-b.tok", {3, 4, 5}).ok());
  ASSERT_TRUE(WriteFlatFile(dir + "/f-a.tok", {1, 2}).ok());
  proto::DatasetSpec flat = Spec(dir + "/f-*.tok");
  flat.set_flat_sample_tokens(2);
  auto ds = Dataset::Open(flat);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->format(), "flat");
  ASSERT_EQ((*ds)->NumShards(), 2u);
  EXPECT_EQ((*ds)->shard(0).FileName(), "f-a.tok");
  EXPECT_EQ(Tokens(**ds, 1, 1), (std::vector<int32_t>{5}));

  auto none = Dataset::Open(Spec(dir + "/nothing-*.bin"));
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("glob '" + dir + "/nothing-*.bin' matches no files"),
            std::string::npos)
      << none.status();
}

TEST(DatasetTest, FingerprintCoversShardNamesAndSizes) {
  const std::string dir = MakeTempDir("fp");
  ASSERT_TRUE(WriteMegatronShard(dir + "/a", kDocs).ok());
  const uint64_t fp1 = Dataset::Open(Spec(dir)).value()->Fingerprint();
  EXPECT_EQ(Dataset::Open(Spec(dir)).value()->Fingerprint(), fp1);
  ASSERT_TRUE(WriteMegatronShard(dir + "/a", {{1, 2}}).ok());
  EXPECT_NE(Dataset::Open(Spec(dir)).value()->Fingerprint(), fp1);
}

TEST(DatasetTest, FileUrlOpensLikeThePlainPath) {
  const std::string dir = MakeTempDir("file_url");
  ASSERT_EQ(dir.front(), '/');
  ASSERT_TRUE(WriteMegatronShard(dir + "/a", kDocs).ok());
  ASSERT_TRUE(WriteMegatronShard(dir + "/b", {{20}}).ok());
  auto by_path = Dataset::Open(Spec(dir));
  ASSERT_TRUE(by_path.ok()) << by_path.status();
  for (const std::string& url : {"file://" + dir, "file://" + dir + "/a.bin"}) {
    auto by_url = Dataset::Open(Spec(url));
    ASSERT_TRUE(by_url.ok()) << url << ": " << by_url.status();
    EXPECT_EQ((*by_url)->format(), "megatron") << url;
    EXPECT_EQ((*by_url)->shard(0).FileName(), "a.bin") << url;
    EXPECT_EQ(Tokens(**by_url, 0, 3), kDocs[3]) << url;
  }
  EXPECT_EQ(Dataset::Open(Spec("file://" + dir)).value()->Fingerprint(),
            (*by_path)->Fingerprint());
  // Flat and glob forms go through the same stripping.
  const std::string flat_dir = MakeTempDir("file_url_flat");
  ASSERT_TRUE(WriteFlatFile(flat_dir + "/x.tok", {1, 2, 3}).ok());
  auto flat = Dataset::Open(Spec("file://" + flat_dir + "/*.tok", "flat"));
  ASSERT_TRUE(flat.ok()) << flat.status();
  EXPECT_EQ(Tokens(**flat, 0, 0), (std::vector<int32_t>{1, 2, 3}));
}

TEST(DatasetTest, UnsupportedSchemesAreInvalidArgumentsNotMissingFiles) {
  for (const char* path : {"gs://bucket/x", "S3://bucket/x", "http://host/x", "file://rel/x"}) {
    auto ds = Dataset::Open(Spec(path));
    ASSERT_FALSE(ds.ok()) << path;
    EXPECT_EQ(ds.status().code(), absl::StatusCode::kInvalidArgument) << ds.status();
    EXPECT_NE(ds.status().message().find(path), std::string::npos) << ds.status();
  }
  const absl::Status gs = Dataset::Open(Spec("gs://bucket/x")).status();
  EXPECT_NE(gs.message().find("s3://bucket/prefix"), std::string::npos) << gs;
  EXPECT_EQ(gs.message().find("cannot open"), std::string::npos) << gs;
  EXPECT_EQ(gs.message().find("dataset 'd': "), 0u) << gs;
}

}  // namespace
}  // namespace zephon::pipeline
