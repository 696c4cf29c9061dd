#include "daemon/checkpoint/dataset_content.h"

#include <gtest/gtest.h>

#include "daemon/pipeline/formats/testing_corpus.h"

namespace zephon::checkpoint {
namespace {

using pipeline::testing::MakeSyntheticDataset;

std::vector<proto::DatasetContent> Describe(
    const std::vector<std::shared_ptr<const pipeline::Dataset>>& ds) {
  auto d = DescribeDatasets(ds, proto::WorkSourceSpec::SAMPLES);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : std::vector<proto::DatasetContent>{};
}

google::protobuf::RepeatedPtrField<proto::DatasetContent> Saved(
    const std::vector<proto::DatasetContent>& v) {
  google::protobuf::RepeatedPtrField<proto::DatasetContent> out;
  for (const auto& d : v) *out.Add() = d;
  return out;
}

TEST(DatasetContentTest, SameFilesCompareEqualAndOldCheckpointsPass) {
  auto a = MakeSyntheticDataset("web", 1, 2, 10, 5);
  const auto now = Describe({a});
  ASSERT_EQ(now.size(), 1u);
  ASSERT_EQ(now[0].shards_size(), 2);
  EXPECT_TRUE(CompareDatasets(Saved(now), Describe({a})).ok());
  EXPECT_TRUE(CompareDatasets({}, now).ok());  // checkpoint without the record
}

TEST(DatasetContentTest, ChangedContentAtTheSameSizeIsNamed) {
  auto a = MakeSyntheticDataset("web", 1, 2, 10, 5);
  auto saved = Saved(Describe({a}));
  auto now = Describe({a});
  now[0].mutable_shards(1)->set_checksum(now[0].shards(1).checksum() ^ 1);
  absl::Status s = CompareDatasets(saved, now);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("dataset 'web' shard 1 (" + now[0].shards(1).file() +
                             "): content changed at the same size"),
            std::string::npos)
      << s;
}

TEST(DatasetContentTest, EachPropertyIsNamed) {
  auto a = MakeSyntheticDataset("web", 1, 2, 10, 5);
  const auto base = Describe({a});
  auto now = base;
  now[0].mutable_shards(0)->set_bytes(base[0].shards(0).bytes() + 2);
  EXPECT_NE(CompareDatasets(Saved(base), now).message().find("size changed from"),
            std::string::npos);
  now = base;
  now[0].mutable_shards(0)->set_samples(3);
  EXPECT_NE(CompareDatasets(Saved(base), now).message().find("sample count changed from 10 to 3"),
            std::string::npos);
  now = base;
  now[0].mutable_shards(0)->set_file("other.bin");
  EXPECT_NE(CompareDatasets(Saved(base), now).message().find("is now 'other.bin'"),
            std::string::npos);
  now = base;
  now[0].mutable_shards()->RemoveLast();
  EXPECT_NE(CompareDatasets(Saved(base), now).message().find("had 2 shard files and now has 1"),
            std::string::npos);
}

TEST(DatasetContentTest, TokenWeightedRunsRecordTheirEstimatesAndRefuseOthers) {
  auto a = MakeSyntheticDataset("web", 1, 2, 10, 5);
  // Lengths 1 + (s * 7 + i * 3) % 5 over s < 2, i < 10: 30 + 30 = 60 tokens / 20.
  auto saved = DescribeDatasets({a}, proto::WorkSourceSpec::TOKENS);
  ASSERT_TRUE(saved.ok()) << saved.status();
  ASSERT_TRUE((*saved)[0].has_tokens_per_sample());
  EXPECT_EQ((*saved)[0].tokens_per_sample(), 3.0);
  EXPECT_FALSE(Describe({a})[0].has_tokens_per_sample());  // weight_by samples
  auto now = *saved;
  EXPECT_TRUE(CompareDatasets(Saved(*saved), now).ok());
  now[0].set_tokens_per_sample(3.25);
  absl::Status s = CompareDatasets(Saved(*saved), now);
  ASSERT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("dataset 'web' measured 3 tokens per sample (weight_by 'tokens') "
                             "when the checkpoint was taken and 3.25 now"),
            std::string::npos)
      << s;
}

TEST(DatasetContentTest, TheChecksumSeesTokensAndSampleLengths) {
  // Same shape, other token values (dataset_tag): same size, other content.
  auto a = MakeSyntheticDataset("web", 1, 1, 10, 5);
  auto b = MakeSyntheticDataset("web", 2, 1, 10, 5);
  EXPECT_NE(Describe({a})[0].shards(0).checksum(), Describe({b})[0].shards(0).checksum());
}

}  // namespace
}  // namespace zephon::checkpoint
