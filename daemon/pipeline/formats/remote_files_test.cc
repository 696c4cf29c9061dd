// Datasets under s3:// paths, opened over a LocalStore (or a failing wrapper of it) in
// place of S3: the same files must give the same shards, tokens and fingerprints as
// the local path, read through the shard cache.
#include "daemon/pipeline/formats/remote_files.h"

#include <fnmatch.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pipeline/formats/dataset.h"
#include "daemon/pipeline/batching/lane_stream.h"
#include "daemon/pipeline/formats/open_dataset_files.h"
#include "daemon/pipeline/formats/path_glob.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/storage/local_store.h"

namespace zephon::pipeline {
namespace {

namespace fs = std::filesystem;
using storage::ObjectInfo;
using storage::ObjectStore;

constexpr char kBucket[] = "s3://zephon-test";

// Forwards to a LocalStore, counting calls per key; can fail every ranged read. Logs
// each listing ("List(prefix)", "ListDirectory(prefix)") and counts the objects the
// listings returned.
class CountingStore final : public ObjectStore {
 public:
  explicit CountingStore(std::unique_ptr<ObjectStore> inner) : inner_(std::move(inner)) {}

  std::vector<std::string> listings() {
    absl::MutexLock lock(&mu_);
    return listings_;
  }
  int listed_objects() {
    absl::MutexLock lock(&mu_);
    return listed_objects_;
  }
  // Listings fail with PERMISSION_DENIED, as under a policy without s3:ListBucket.
  void DenyListing() {
    absl::MutexLock lock(&mu_);
    deny_listing_ = true;
  }
  void ResetListings() {
    absl::MutexLock lock(&mu_);
    listings_.clear();
    listed_objects_ = 0;
  }

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
    absl::StatusOr<std::vector<ObjectInfo>> all = inner_->List(prefix);
    absl::MutexLock lock(&mu_);
    if (deny_listing_) return absl::PermissionDeniedError("HTTP 403 AccessDenied (list)");
    listings_.push_back(absl::StrCat("List(", prefix, ")"));
    if (all.ok()) listed_objects_ += static_cast<int>(all->size());
    return all;
  }
  absl::StatusOr<storage::DirectoryListing> ListDirectory(const std::string& prefix) override {
    absl::StatusOr<storage::DirectoryListing> level = inner_->ListDirectory(prefix);
    absl::MutexLock lock(&mu_);
    if (deny_listing_) return absl::PermissionDeniedError("HTTP 403 AccessDenied (list)");
    listings_.push_back(absl::StrCat("ListDirectory(", prefix, ")"));
    if (level.ok()) listed_objects_ += static_cast<int>(level->objects.size());
    return level;
  }
  absl::Status Delete(const std::string& key) override { return inner_->Delete(key); }
  absl::StatusOr<ObjectInfo> Head(const std::string& key) override { return inner_->Head(key); }

 private:
  const std::unique_ptr<ObjectStore> inner_;
  absl::Mutex mu_;
  std::map<std::string, int> gets_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> ranges_ ABSL_GUARDED_BY(mu_);
  absl::Status fail_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> listings_ ABSL_GUARDED_BY(mu_);
  int listed_objects_ ABSL_GUARDED_BY(mu_) = 0;
  bool deny_listing_ ABSL_GUARDED_BY(mu_) = false;
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

TEST_F(RemoteDatasetTest, ObjectsOpenWithoutListPermission) {
  // s3:GetObject without s3:ListBucket: a shard prefix or object still opens; a
  // directory or glob needs the listing and says so.
  store_->DenyListing();
  ExpectSameAsLocal(absl::StrCat(kBucket, "/corpus/shard-0"), bucket_dir_ + "/corpus/shard-0");
  ExpectSameAsLocal(absl::StrCat(kBucket, "/corpus/shard-1.bin"),
                    bucket_dir_ + "/corpus/shard-1.bin", "megatron");
  EXPECT_EQ(Open(absl::StrCat(kBucket, "/corpus/")).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(Open(absl::StrCat(kBucket, "/corpus/shard-*")).status().code(),
            absl::StatusCode::kPermissionDenied);
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
  // Every .bin byte once, and of each .idx at most all of it (the doc_idx at its end is
  // never needed, so it need not be fetched).
  const uint64_t bins = fs::file_size(bucket_dir_ + "/corpus/shard-0.bin") +
                        fs::file_size(bucket_dir_ + "/corpus/shard-1.bin");
  const uint64_t idxs = fs::file_size(bucket_dir_ + "/corpus/shard-0.idx") +
                        fs::file_size(bucket_dir_ + "/corpus/shard-1.idx");
  EXPECT_GT(stats.bytes_downloaded, bins);
  EXPECT_LE(stats.bytes_downloaded, bins + idxs);
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

// A deep subtree under the dataset directory: 3 levels of 4 directories of 5 files.
void WriteNestedTree(const std::string& dir) {
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      for (int c = 0; c < 4; ++c) {
        const std::string sub = absl::StrCat(dir, "/d", a, "/d", b, "/d", c);
        fs::create_directories(sub);
        for (int f = 0; f < 5; ++f) {
          ASSERT_TRUE(testing::WriteFlatFile(absl::StrCat(sub, "/shard-", f, ".bin"), {1}).ok());
        }
      }
    }
  }
}

TEST_F(RemoteDatasetTest, DirectoriesAndOneLevelGlobsListOnlyTheirLevel) {
  WriteNestedTree(bucket_dir_ + "/corpus/nested");  // 320 objects below the dataset
  auto files = RemoteDatasetFiles::Open(kBucket, options_);
  ASSERT_TRUE(files.ok()) << files.status();
  const std::vector<std::string> top = {absl::StrCat(kBucket, "/corpus/shard-0.bin"),
                                        absl::StrCat(kBucket, "/corpus/shard-0.idx"),
                                        absl::StrCat(kBucket, "/corpus/shard-1.bin"),
                                        absl::StrCat(kBucket, "/corpus/shard-1.idx")};

  auto dir = (*files)->Resolve(absl::StrCat(kBucket, "/corpus/"));
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(dir->kind, DatasetFiles::Kind::kDirectory);
  EXPECT_EQ(dir->files, top);
  EXPECT_EQ(store_->listings(), (std::vector<std::string>{"ListDirectory(corpus/)"}));
  EXPECT_EQ(store_->listed_objects(), 5);  // the four shard files and .hidden

  store_->ResetListings();
  auto glob = (*files)->Resolve(absl::StrCat(kBucket, "/corpus/shard-*.bin"));
  ASSERT_TRUE(glob.ok()) << glob.status();
  EXPECT_EQ(glob->kind, DatasetFiles::Kind::kGlob);
  EXPECT_EQ(glob->files, (std::vector<std::string>{top[0], top[2]}));
  EXPECT_EQ(store_->listings(), (std::vector<std::string>{"ListDirectory(corpus/shard-)"}));
  EXPECT_EQ(store_->listed_objects(), 4);

  store_->ResetListings();
  auto bare = (*files)->Resolve(absl::StrCat(kBucket, "/corpus/*"));
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->files, top);  // "nested" is no object, ".hidden" needs an explicit '.'
  EXPECT_EQ(store_->listings(), (std::vector<std::string>{"ListDirectory(corpus/)"}));

  // A pattern spanning directories still lists the subtree under its literal part.
  store_->ResetListings();
  auto deep = (*files)->Resolve(absl::StrCat(kBucket, "/corpus/nested/d1/*/d3/shard-4.bin"));
  ASSERT_TRUE(deep.ok()) << deep.status();
  EXPECT_EQ(deep->files,
            (std::vector<std::string>{
                absl::StrCat(kBucket, "/corpus/nested/d1/d0/d3/shard-4.bin"),
                absl::StrCat(kBucket, "/corpus/nested/d1/d1/d3/shard-4.bin"),
                absl::StrCat(kBucket, "/corpus/nested/d1/d2/d3/shard-4.bin"),
                absl::StrCat(kBucket, "/corpus/nested/d1/d3/d3/shard-4.bin")}));
  EXPECT_EQ(store_->listings(), (std::vector<std::string>{"List(corpus/nested/d1/)"}));
  EXPECT_EQ(store_->listed_objects(), 80);

  // The dataset opens to the same shards as before, listing one level.
  store_->ResetListings();
  auto ds = Open(absl::StrCat(kBucket, "/corpus"));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(Names(**ds), (std::vector<std::string>{"shard-0.bin", "shard-1.bin"}));
  for (const std::string& listing : store_->listings()) {
    EXPECT_TRUE(absl::StartsWith(listing, "ListDirectory(")) << listing;
  }
  EXPECT_LE(store_->listed_objects(), 5);
}

// The oracle: Resolve as it was before ListDirectory, a recursive List for every form.
absl::StatusOr<DatasetFiles::Resolved> RecursiveResolve(ObjectStore& store, std::string key) {
  using Kind = DatasetFiles::Kind;
  auto url = [](const std::string& k) { return absl::StrCat(kBucket, "/", k); };
  DatasetFiles::Resolved out;
  if (IsGlobPattern(key)) {
    out.kind = Kind::kGlob;
    const std::string literal = key.substr(0, key.find_first_of("*?[\\"));
    absl::StatusOr<std::vector<ObjectInfo>> listed = store.List(literal);
    if (!listed.ok()) return listed.status();
    for (const ObjectInfo& info : *listed) {
      if (fnmatch(key.c_str(), info.key.c_str(), FNM_PATHNAME | FNM_PERIOD) == 0) {
        out.files.push_back(url(info.key));
      }
    }
    if (out.files.empty()) return absl::NotFoundError("glob matches nothing");
    std::sort(out.files.begin(), out.files.end());
    return out;
  }
  while (!key.empty() && key.back() == '/') key.pop_back();
  const std::string dir = key.empty() ? "" : key + "/";
  absl::StatusOr<std::vector<ObjectInfo>> listed = store.List(dir);
  if (!listed.ok()) return listed.status();
  if (key.empty() || !listed->empty()) {
    out.kind = Kind::kDirectory;
    for (const ObjectInfo& info : *listed) {
      const std::string name = info.key.substr(dir.size());
      if (name.empty() || name[0] == '.' || name.find('/') != std::string::npos) continue;
      out.files.push_back(url(info.key));
    }
    std::sort(out.files.begin(), out.files.end());
    return out;
  }
  out.kind = Kind::kSingle;
  out.files.push_back(url(key));
  return out;
}

TEST_F(RemoteDatasetTest, OneLevelListingsResolveExactlyAsRecursiveListingsDid) {
  WriteNestedTree(bucket_dir_ + "/corpus/nested");
  fs::create_directories(bucket_dir_ + "/only-deeper/a/b");  // objects only further down
  ASSERT_TRUE(testing::WriteFlatFile(bucket_dir_ + "/only-deeper/a/b/x.bin", {1}).ok());
  fs::create_directories(bucket_dir_ + "/empty-dirs/a/b");  // no object at all
  ASSERT_TRUE(testing::WriteFlatFile(bucket_dir_ + "/top.bin", {1}).ok());
  const std::vector<std::string> paths = {
      "", "/", "/corpus", "/corpus/", "/corpus//", "/corpus/nested", "/corpus/nested/d2/d0",
      "/only-deeper", "/only-deeper/a", "/empty-dirs", "/empty-dirs/a", "/missing",
      "/corpus/shard-0.bin", "/corpus/shard-0", "/corpus/shard-*", "/corpus/shard-?.idx",
      "/corpus/*", "/corpus/.*", "/corpus/[s]hard-1.*", "/corpus/nested/*/d1/shard-[0-2].bin",
      "/*/shard-1.bin", "/*", "/corpus/nested/d3/d3/d3/*", "/only-deeper/*", "/empty-dirs/*",
      "/corpus/zzz*"};
  auto files = RemoteDatasetFiles::Open(kBucket, options_);
  ASSERT_TRUE(files.ok()) << files.status();
  for (const std::string& path : paths) {
    auto got = (*files)->Resolve(kBucket + path);
    auto want = RecursiveResolve(*store_, path.empty() ? "" : path.substr(1));
    ASSERT_EQ(got.status().code(), want.status().code()) << path << ": " << got.status();
    if (!got.ok()) continue;
    EXPECT_EQ(got->kind, want->kind) << path;
    EXPECT_EQ(got->files, want->files) << path;
  }
  // The cases that tell "directory" from "object" by objects deeper down.
  auto deeper = (*files)->Resolve(absl::StrCat(kBucket, "/only-deeper"));
  ASSERT_TRUE(deeper.ok()) << deeper.status();
  EXPECT_EQ(deeper->kind, DatasetFiles::Kind::kDirectory);
  EXPECT_TRUE(deeper->files.empty());
  auto empty = (*files)->Resolve(absl::StrCat(kBucket, "/empty-dirs"));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->kind, DatasetFiles::Kind::kSingle);  // no object: as in S3
}

TEST_F(RemoteDatasetTest, WithoutANodeCacheDatasetsStillOpenAndRead) {
  options_.shard_cache = nullptr;  // a private memory-only cache
  ExpectSameAsLocal(absl::StrCat(kBucket, "/corpus"), bucket_dir_ + "/corpus");
  EXPECT_TRUE(!fs::exists(root_ + "/objects") || fs::is_empty(root_ + "/objects"));
}

TEST_F(RemoteDatasetTest, OpenDatasetFilesPicksTheStoreByLocationKind) {
  // kS3 goes through options.open_store: the listing is the fake store's.
  auto remote = OpenDatasetFiles(
      storage::Location{storage::LocationKind::kS3, absl::StrCat(kBucket, "/corpus")}, options_);
  ASSERT_TRUE(remote.ok()) << remote.status();
  auto listed = (*remote)->Resolve(absl::StrCat(kBucket, "/corpus"));
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->kind, DatasetFiles::Kind::kDirectory);
  EXPECT_FALSE(store_->listings().empty());
  // kLocal reads the filesystem and never asks the store.
  store_->ResetListings();
  auto local = OpenDatasetFiles(
      storage::Location{storage::LocationKind::kLocal, bucket_dir_ + "/corpus"}, options_);
  ASSERT_TRUE(local.ok()) << local.status();
  auto files = (*local)->Resolve(bucket_dir_ + "/corpus");
  ASSERT_TRUE(files.ok()) << files.status();
  EXPECT_EQ(files->kind, DatasetFiles::Kind::kDirectory);
  EXPECT_EQ(files->files.size(), listed->files.size());
  EXPECT_TRUE(store_->listings().empty());
  // The remote opener's own errors come back unchanged.
  options_.open_store = nullptr;
  auto bad = OpenDatasetFiles(storage::Location{storage::LocationKind::kS3, "s3://"}, options_);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
}

// What a record shard's cache key is built from (record_shard.h): the object's URL,
// size and version remotely; the absolute path, size and mtime locally, with a check
// that the file did not change.
TEST_F(RemoteDatasetTest, SourceIdentityKeysTheObjectOrTheFile) {
  const std::string url = absl::StrCat(kBucket, "/corpus/shard-0.idx");
  auto remote = OpenDatasetFiles(storage::Location{storage::LocationKind::kS3, url}, options_);
  ASSERT_TRUE(remote.ok()) << remote.status();
  auto id = (*remote)->SourceIdentity(url);
  ASSERT_TRUE(id.ok()) << id.status();
  const uint64_t size = fs::file_size(bucket_dir_ + "/corpus/shard-0.idx");
  EXPECT_EQ(id->size, size);
  EXPECT_EQ(id->bytes.substr(0, 7 + url.size() + 1), std::string("remote\0", 7) + url + '\0');
  EXPECT_FALSE(id->unchanged);
  EXPECT_EQ((*remote)->SourceIdentity(url + "-missing").status().code(),
            absl::StatusCode::kNotFound);

  const std::string path = bucket_dir_ + "/corpus/shard-0.idx";
  auto local = OpenDatasetFiles(storage::Location{storage::LocationKind::kLocal, path}, options_);
  ASSERT_TRUE(local.ok()) << local.status();
  auto lid = (*local)->SourceIdentity(path);
  ASSERT_TRUE(lid.ok()) << lid.status();
  EXPECT_EQ(lid->size, size);
  EXPECT_EQ(lid->bytes.substr(0, path.size() + 1), path + '\0');
  ASSERT_TRUE(lid->unchanged);
  EXPECT_TRUE(lid->unchanged().ok());
  ASSERT_TRUE(testing::WriteFlatFile(path, {1, 2, 3, 4, 5, 6, 7, 8, 9}).ok());
  EXPECT_EQ(lid->unchanged().code(), absl::StatusCode::kAborted);
}

}  // namespace
}  // namespace zephon::pipeline
