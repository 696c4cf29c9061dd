// Datasets under s3:// paths, opened over a LocalStore (or a failing wrapper of it) in
// place of S3: the same files must give the same shards, tokens and fingerprints as
// the local path, read through the shard cache.
#include "daemon/pipeline/remote_files.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pipeline/dataset.h"
#include "daemon/pipeline/lane_stream.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/testing_corpus.h"
#include "daemon/storage/local_store.h"

namespace zephon::pipeline {
namespace {

namespace fs = std::filesystem;
using storage::ObjectInfo;
using storage::ObjectStore;

constexpr char kBucket[] = "s3://zephon-test";

// Forwards to a LocalStore, counting calls per key; can fail every ranged read.
class CountingStore final : public ObjectStore {
 public:
  explicit CountingStore(std::unique_ptr<ObjectStore> inner) : inner_(std::move(inner)) {}

  int gets(const std::string& key) {
    absl::MutexLock lock(&mu_);
    return gets_[key];
  }
  int ranges(const std::string& key) {
    absl::MutexLock lock(&mu_);
    return ranges_[key];
  }
  int total_ranges() {
    absl::MutexLock lock(&mu_);
    int n = 0;
    for (const auto& [k, v] : ranges_) n += v;
    return n;
  }
  void FailRanges(absl::Status s) {
    absl::MutexLock lock(&mu_);
    fail_ = std::move(s);
  }

  absl::StatusOr<std::string> Get(const std::string& key,
                                  const std::string& if_version = "") override {
    {
      absl::MutexLock lock(&mu_);
      ++gets_[key];
    }
    return inner_->Get(key, if_version);
  }
  absl::StatusOr<std::string> GetRange(const std::string& key, uint64_t offset,
                                       uint64_t length,
                                       const std::string& if_version = "") override {
    {
      absl::MutexLock lock(&mu_);
      ++ranges_[key];
      if (!fail_.ok()) return fail_;
    }
    return inner_->GetRange(key, offset, length, if_version);
  }
  absl::Status Put(const std::string& key, std::string_view bytes) override {
    return inner_->Put(key, bytes);
  }
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override {
    return inner_->List(prefix);
  }
  absl::Status Delete(const std::string& key) override { return inner_->Delete(key); }
  absl::StatusOr<ObjectInfo> Head(const std::string& key) override { return inner_->Head(key); }

 private:
  const std::unique_ptr<ObjectStore> inner_;
  absl::Mutex mu_;
  std::map<std::string, int> gets_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> ranges_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_ ABSL_GUARDED_BY(mu_);
};

std::vector<std::vector<int32_t>> Docs(int n, int seed) {
  std::vector<std::vector<int32_t>> docs;
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> d(1 + (i * 37 + seed) % 90);
    for (size_t j = 0; j < d.size(); ++j) {
      d[j] = (seed * 1000 + i * 7 + static_cast<int>(j)) % 60000;
    }
    docs.push_back(std::move(d));
  }
  return docs;
}

// The bucket's files live under <root>/bucket; the same dataset is read either as
// <root>/bucket/<dir> or as s3://zephon-test/<dir>.
class RemoteDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = testing::MakeTempDir("remote_files");
    bucket_dir_ = root_ + "/bucket";
    fs::create_directories(bucket_dir_ + "/corpus/nested");
    ASSERT_TRUE(testing::WriteMegatronShard(bucket_dir_ + "/corpus/shard-0", Docs(60, 1)).ok());
    ASSERT_TRUE(testing::WriteMegatronShard(bucket_dir_ + "/corpus/shard-1", Docs(45, 2), 4).ok());
    // Not part of the directory dataset: nested objects and dot-files.
    ASSERT_TRUE(
        testing::WriteMegatronShard(bucket_dir_ + "/corpus/nested/shard-9", Docs(5, 3)).ok());
    ASSERT_TRUE(testing::WriteFlatFile(bucket_dir_ + "/corpus/.hidden", {1, 2, 3}).ok());
    store_ = std::make_shared<CountingStore>(storage::LocalStore::Open(bucket_dir_).value());
    storage::ShardCacheOptions cache;
    cache.dir = root_ + "/objects";
    cache.block_bytes = 512;  // many blocks per .bin, whole-object entries for small files
    shard_cache_ = storage::ShardCache::Create(cache).value();
    options_.cache_dir = root_ + "/tokens";
    options_.shard_cache = shard_cache_;
    options_.open_store = [this](const std::string& bucket_url)
        -> absl::StatusOr<std::shared_ptr<ObjectStore>> {
      EXPECT_EQ(bucket_url, kBucket);
      return std::shared_ptr<ObjectStore>(store_);
    };
  }

  absl::StatusOr<std::unique_ptr<Dataset>> Open(const std::string& path,
                                                const std::string& format = "") {
    proto::DatasetSpec spec;
    spec.set_name("web");
    spec.set_path(path);
    spec.set_format(format);
    return Dataset::Open(spec, options_);
  }

  // Every token of every sample, read sample by sample in pieces of `piece` tokens.
  static std::vector<int32_t> AllTokens(const Dataset& ds, uint64_t piece = 7) {
    std::vector<int32_t> out;
    for (uint32_t s = 0; s < ds.NumShards(); ++s) {
      for (uint64_t i = 0; i < ds.ShardSamples(s); ++i) {
        const uint64_t len = ds.SampleLength(s, i);
        for (uint64_t off = 0; off < len; off += piece) {
          const absl::Status st = ds.AppendTokens(s, i, off, std::min(piece, len - off), &out);
          EXPECT_TRUE(st.ok()) << st;
        }
      }
    }
    return out;
  }

  static std::vector<std::string> Names(const Dataset& ds) {
    std::vector<std::string> names;
    for (uint32_t s = 0; s < ds.NumShards(); ++s) names.push_back(ds.shard(s).FileName());
    return names;
  }

  void ExpectSameAsLocal(const std::string& remote_path, const std::string& local_path,
                         const std::string& format = "") {
    auto remote = Open(remote_path, format);
    auto local = Open(local_path, format);
    ASSERT_TRUE(remote.ok()) << remote.status();
    ASSERT_TRUE(local.ok()) << local.status();
    EXPECT_EQ((*remote)->format(), (*local)->format());
    EXPECT_EQ(Names(**remote), Names(**local));
    EXPECT_EQ((*remote)->NumSamples(), (*local)->NumSamples());
    EXPECT_EQ((*remote)->Fingerprint(), (*local)->Fingerprint());
    EXPECT_EQ(AllTokens(**remote), AllTokens(**local));
  }

  std::string root_, bucket_dir_;
  std::shared_ptr<CountingStore> store_;
  std::shared_ptr<storage::ShardCache> shard_cache_;
  OpenOptions options_;
};

TEST_F(RemoteDatasetTest, MegatronDirectoryReadsTheSameTokensAsTheLocalFiles) {
  ExpectSameAsLocal(absl::StrCat(kBucket, "/corpus"), bucket_dir_ + "/corpus");
  ExpectSameAsLocal(absl::StrCat(kBucket, "/corpus/"), bucket_dir_ + "/corpus", "megatron");
  auto ds = Open(absl::StrCat(kBucket, "/corpus"));
  ASSERT_TRUE(ds.ok());
  EXPECT_EQ(Names(**ds), (std::vector<std::string>{"shard-0.bin", "shard-1.bin"}));
}

TEST_F(RemoteDatasetTest, MegatronPrefixAndGlobsPairLikeLocalPaths) {
  ExpectSameAsLocal(absl::StrCat(kBucket, "/corpus/shard-1"), bucket_dir_ + "/corpus/shard-1");
  ExpectSameAsLocal(absl::StrCat(kBucket, "/corpus/shard-0.bin"),
                    bucket_dir_ + "/corpus/shard-0.bin");
  ExpectSameAsLocal(absl::StrCat(kBucket, "/corpus/shard-*.bin"),
                    bucket_dir_ + "/corpus/shard-*.bin");
  ExpectSameAsLocal(absl::StrCat(kBucket, "/corpus/shard-[1]*"),
                    bucket_dir_ + "/corpus/shard-[1]*");
  // '*' stays inside one path segment: the nested shard is not matched.
  auto ds = Open(absl::StrCat(kBucket, "/corpus/*.idx"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ((*ds)->NumShards(), 2u);
  auto none = Open(absl::StrCat(kBucket, "/corpus/zzz*"));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StrContains(none.status().message(), "s3://zephon-test/corpus/zzz*"))
      << none.status();
}

TEST_F(RemoteDatasetTest, TheIndexIsFetchedOnceAndBinReadsAreRangedAndCached) {
  auto ds = Open(absl::StrCat(kBucket, "/corpus"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  const int idx_fetches = store_->gets("corpus/shard-0.idx") + store_->ranges("corpus/shard-0.idx");
  EXPECT_GE(idx_fetches, 1);
  EXPECT_EQ(store_->ranges("corpus/shard-0.bin"), 0);  // nothing read at open
  const std::vector<int32_t> first = AllTokens(**ds);
  const int bin_reads = store_->ranges("corpus/shard-0.bin");
  EXPECT_GT(bin_reads, 1);  // block-sized ranged GETs
  EXPECT_EQ(AllTokens(**ds, 3), first);
  EXPECT_EQ(store_->ranges("corpus/shard-0.bin"), bin_reads);  // the second pass hits
  EXPECT_EQ(store_->gets("corpus/shard-0.idx") + store_->ranges("corpus/shard-0.idx"),
            idx_fetches);  // the index stayed resident
  const storage::ShardCacheStats stats = shard_cache_->Stats();
  EXPECT_GT(stats.hits, 0u);
  EXPECT_EQ(stats.bytes_downloaded,
            fs::file_size(bucket_dir_ + "/corpus/shard-0.bin") +
                fs::file_size(bucket_dir_ + "/corpus/shard-1.bin") +
                fs::file_size(bucket_dir_ + "/corpus/shard-0.idx") +
                fs::file_size(bucket_dir_ + "/corpus/shard-1.idx"));
}

TEST_F(RemoteDatasetTest, FlatAndJsonlReadTheSameTokensAsTheLocalFiles) {
  std::vector<uint32_t> flat;
  for (uint32_t i = 0; i < 3000; ++i) flat.push_back((i * 31) % 65000);
  fs::create_directories(bucket_dir_ + "/flat");
  ASSERT_TRUE(testing::WriteFlatFile(bucket_dir_ + "/flat/a.tok", flat).ok());
  ASSERT_TRUE(testing::WriteFlatFile(bucket_dir_ + "/flat/b.tok", {5, 6, 7}).ok());
  ExpectSameAsLocal(absl::StrCat(kBucket, "/flat"), bucket_dir_ + "/flat", "flat");

  fs::create_directories(bucket_dir_ + "/jsonl");
  std::string text;
  for (int i = 0; i < 200; ++i) {
    absl::StrAppend(&text, "{\"input_ids\": [", i, ", ", i + 1, ", ", 2 * i, "]}\n");
  }
  ASSERT_TRUE(testing::WriteTextFile(bucket_dir_ + "/jsonl/part-0.jsonl.gz", text).ok());
  ASSERT_TRUE(testing::WriteTextFile(bucket_dir_ + "/jsonl/part-1.jsonl", text).ok());
  ExpectSameAsLocal(absl::StrCat(kBucket, "/jsonl"), bucket_dir_ + "/jsonl");
  // A second open finds the token cache: the sources are not downloaded again.
  const uint64_t downloaded = shard_cache_->Stats().bytes_downloaded;
  const int gets = store_->gets("jsonl/part-1.jsonl");
  ASSERT_TRUE(Open(absl::StrCat(kBucket, "/jsonl")).ok());
  EXPECT_EQ(store_->gets("jsonl/part-1.jsonl"), gets);
  EXPECT_EQ(shard_cache_->Stats().bytes_downloaded, downloaded);
  // A replaced object (new version) is converted again: the new tokens, not the cached.
  ASSERT_TRUE(testing::WriteTextFile(bucket_dir_ + "/jsonl/part-1.jsonl",
                                     "{\"input_ids\": [7, 8, 9]}\n").ok());
  auto changed = Open(absl::StrCat(kBucket, "/jsonl/part-1.jsonl"));
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(AllTokens(**changed), (std::vector<int32_t>{7, 8, 9}));
}

TEST_F(RemoteDatasetTest, SpecHashIsTheSameForTheLocalAndTheRemoteCopy) {
  proto::PipelineSpec spec = testing::SpecOverDatasets({"web"});
  spec.mutable_work_source()->mutable_datasets(0)->set_path(bucket_dir_ + "/corpus");
  spec.add_operators()->mutable_pack_flat()->set_max_length(17);
  spec.add_operators()->mutable_batch()->set_microbatch_size(2);
  proto::PipelineSpec remote = spec;
  remote.mutable_work_source()->mutable_datasets(0)->set_path(absl::StrCat(kBucket, "/corpus"));
  auto local_resolved = ResolveSpec(spec, 1).value();
  auto remote_resolved = ResolveSpec(remote, 1).value();
  auto local_ds = OpenDatasets(local_resolved, options_);
  auto remote_ds = OpenDatasets(remote_resolved, options_);
  ASSERT_TRUE(local_ds.ok()) << local_ds.status();
  ASSERT_TRUE(remote_ds.ok()) << remote_ds.status();
  EXPECT_EQ(SpecHash(local_resolved, *local_ds), SpecHash(remote_resolved, *remote_ds));
}

TEST_F(RemoteDatasetTest, MissingObjectsAreNamed) {
  auto missing = Open(absl::StrCat(kBucket, "/corpus/shard-7"), "megatron");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound) << missing.status();
  EXPECT_TRUE(absl::StrContains(missing.status().message(), "shard-7.idx")) << missing.status();
  fs::create_directories(bucket_dir_ + "/half");
  ASSERT_TRUE(testing::WriteFlatFile(bucket_dir_ + "/half/x.bin", {1, 2}).ok());
  ASSERT_TRUE(testing::WriteMegatronShard(bucket_dir_ + "/half/y", Docs(3, 4)).ok());
  auto half = Open(absl::StrCat(kBucket, "/half"));
  EXPECT_EQ(half.status().code(), absl::StatusCode::kNotFound) << half.status();
  EXPECT_TRUE(absl::StrContains(half.status().message(), "s3://zephon-test/half/x.bin has no "
                                                         "matching .idx")) << half.status();
  EXPECT_EQ(Open("s3://Bad_Bucket/x").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(RemoteDatasetTest, ReadErrorsReachTheBatchNamingLaneBatchAndObject) {
  auto opened = Open(absl::StrCat(kBucket, "/corpus/shard-0"));
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::vector<std::shared_ptr<const Dataset>> datasets = {std::move(*opened)};
  store_->FailRanges(absl::UnavailableError(
      "S3 GET s3://zephon-test/corpus/shard-0.bin (bucket 'zephon-test'): HTTP 503 SlowDown"));
  BatchPlan plan;
  plan.lane = 3;
  plan.lane_batch_index = 7;
  plan.rows = 1;
  plan.cols = 4;
  plan.segments.push_back({SampleId{0, 0, 2}, 0, 4});
  std::vector<int32_t> tokens(4), positions(4);
  const absl::Status s = MaterializeInto(plan, datasets, tokens.data(), positions.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  for (const char* part : {"lane 3 batch 7, sample 0/0/2 of 'web': block 0: S3 GET "
                           "s3://zephon-test/corpus/shard-0.bin", "HTTP 503"}) {
    EXPECT_TRUE(absl::StrContains(s.message(), part)) << part << " missing from " << s;
  }
  store_->FailRanges(absl::OkStatus());  // the next read retries and succeeds
  EXPECT_TRUE(MaterializeInto(plan, datasets, tokens.data(), positions.data()).ok());
  const std::vector<int32_t> doc = Docs(60, 1)[2];
  EXPECT_EQ(tokens, std::vector<int32_t>(doc.begin(), doc.begin() + 4));
}

TEST_F(RemoteDatasetTest, WithoutANodeCacheDatasetsStillOpenAndRead) {
  options_.shard_cache = nullptr;  // a private memory-only cache
  ExpectSameAsLocal(absl::StrCat(kBucket, "/corpus"), bucket_dir_ + "/corpus");
  EXPECT_TRUE(!fs::exists(root_ + "/objects") || fs::is_empty(root_ + "/objects"));
}

}  // namespace
}  // namespace zephon::pipeline
