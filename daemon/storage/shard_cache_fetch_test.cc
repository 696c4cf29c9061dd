#include "daemon/storage/shard_cache_fetch.h"

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/storage/fake_object_store_testing.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

ObjectInfo Info(uint64_t size, std::string version) {
  ObjectInfo info;
  info.key = "data/obj";
  info.size = size;
  info.version = std::move(version);
  return info;
}

constexpr char kUrl[] = "s3://bucket/data/obj";

TEST(ShardCacheFetchTest, ASmallObjectIsOneConditionalGet) {
  FakeObjectStore store;
  store.Set("data/obj", "0123456789", "v1");
  auto got = FetchBlock(store, kUrl, Info(10, "v1"), /*block_bytes=*/100, 0, 10, true);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "0123456789");
  EXPECT_EQ(store.reads(), std::vector<std::string>{"get data/obj if 'v1'"});
}

TEST(ShardCacheFetchTest, ABlockOfALargeObjectIsOneConditionalRange) {
  FakeObjectStore store;
  store.Set("data/obj", "0123456789", "v1");
  auto got = FetchBlock(store, kUrl, Info(10, "v1"), /*block_bytes=*/4, 2, 2, true);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "89");
  EXPECT_EQ(store.reads(), std::vector<std::string>{"range data/obj 8+2 if 'v1'"});
}

TEST(ShardCacheFetchTest, WithoutVerifyVersionTheReadIsUnconditional) {
  FakeObjectStore store;
  store.Set("data/obj", "0123456789", "v2");
  auto got = FetchBlock(store, kUrl, Info(10, "v1"), 4, 0, 4, /*verify_version=*/false);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(store.reads(), std::vector<std::string>{"range data/obj 0+4 if ''"});
}

TEST(ShardCacheFetchTest, AReplacedObjectFailsNamingBothVersions) {
  FakeObjectStore store;
  store.Set("data/obj", "0123456789", "v2");
  auto got = FetchBlock(store, kUrl, Info(10, "v1"), 4, 1, 4, true);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(got.status().message(), kUrl)) << got.status();
  EXPECT_TRUE(absl::StrContains(got.status().message(), "changed since the dataset was opened"));
  EXPECT_TRUE(absl::StrContains(got.status().message(), "version 'v1'")) << got.status();
  EXPECT_TRUE(absl::StrContains(got.status().message(), "version 'v2'")) << got.status();
}

TEST(ShardCacheFetchTest, AChangedLengthIsDataLoss) {
  FakeObjectStore store;
  store.Set("data/obj", "01234567", "");  // no versions: the length is the only check
  auto shorter = FetchBlock(store, kUrl, Info(10, ""), 4, 2, 2, true);  // bytes [8, 10)
  EXPECT_EQ(shorter.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(shorter.status().message(), "block 2 (bytes [8, 10)) of "))
      << shorter.status();
  EXPECT_TRUE(absl::StrContains(shorter.status().message(), "changed since the dataset"));
  auto whole = FetchBlock(store, kUrl, Info(10, ""), 100, 0, 10, true);
  EXPECT_EQ(whole.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(whole.status().message(), "returned 8 bytes, expected 10"))
      << whole.status();
}

TEST(ShardCacheFetchTest, ARangePastTheEndOfAShrunkObjectIsDataLoss) {
  FakeObjectStore store;
  store.Set("data/obj", "0123", "");
  auto got = FetchBlock(store, kUrl, Info(12, ""), 4, 2, 4, true);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(absl::StrContains(got.status().message(), "passes the end")) << got.status();
}

TEST(ShardCacheFetchTest, StoreErrorsKeepTheirCodeAndNameTheBlockOnce) {
  FakeObjectStore store;
  store.Set("data/obj", "0123456789", "v1");
  store.FailWith(absl::UnavailableError("connection refused"));
  auto got = FetchBlock(store, kUrl, Info(10, "v1"), 4, 1, 4, true);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(got.status().message(), absl::StrCat("block 1 of ", kUrl, ": connection refused"));
  store.FailWith(absl::NotFoundError(absl::StrCat(kUrl, " not found")));
  got = FetchBlock(store, kUrl, Info(10, "v1"), 100, 0, 10, true);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(got.status().message(), absl::StrCat(kUrl, " not found"));  // no second URL
}

}  // namespace
}  // namespace zephon::storage
