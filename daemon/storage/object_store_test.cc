#include "daemon/storage/object_store.h"

#include <stdlib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/storage/local_store.h"
#include "daemon/storage/open_store.h"
#include "daemon/storage/s3_store.h"
#include "common/temp_dir_testing.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

std::string TempDir() { return testing::MakeTempDir("object_store"); }

TEST(ParseS3Url, SplitsBucketAndKey) {
  auto loc = ParseS3Url("s3://my-bucket/prefix/x");
  ASSERT_TRUE(loc.ok()) << loc.status();
  EXPECT_EQ(loc->bucket, "my-bucket");
  EXPECT_EQ(loc->key, "prefix/x");
  EXPECT_EQ(ParseS3Url("s3://bucket")->key, "");
  EXPECT_EQ(ParseS3Url("s3://bucket/")->key, "");
  EXPECT_EQ(ParseS3Url("s3://a.b-c/k/")->key, "k/");
}

TEST(ParseS3Url, RejectsBadUrlsWithClearErrors) {
  for (const char* bad : {"http://bucket/x", "s3:/bucket", "s3://", "s3:///x", "s3://ab/x",
                          "s3://Bucket/x", "s3://bucket_1/x", "s3://-bucket/x"}) {
    auto loc = ParseS3Url(bad);
    EXPECT_EQ(loc.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(loc.status().message(), bad)) << loc.status();
  }
}

TEST(OpenStore, S3UrlOpensAnS3StoreWhenCredentialsAreSet) {
  setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
  auto store = OpenStore("s3://bucket/prefix", S3Options());
  EXPECT_TRUE(store.ok()) << store.status();
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  auto no_creds = OpenStore("s3://bucket/prefix", S3Options());
  EXPECT_EQ(no_creds.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(no_creds.status().message(), "AWS_ACCESS_KEY_ID"));
  EXPECT_EQ(OpenStore("s3://B/x", S3Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The S3 settings come from the caller (its owner's --s3-* flags), not from a process
// global: two stores opened with different defaults keep their own.
TEST(OpenStore, S3StoresStartFromTheDefaultsTheyAreGiven) {
  setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "secret", 1);
  S3Options minio;
  minio.endpoint = "http://minio:9000";
  minio.max_attempts = 2;
  S3Options other;
  other.endpoint = "http://10.0.0.1:4568";
  auto a = OpenStore("s3://bucket/a", minio);
  auto b = OpenStore("s3://bucket/b", other, absl::Seconds(10));
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  const auto* sa = dynamic_cast<const S3Store*>(a->get());
  const auto* sb = dynamic_cast<const S3Store*>(b->get());
  ASSERT_NE(sa, nullptr);
  ASSERT_NE(sb, nullptr);
  EXPECT_EQ(sa->options().endpoint, "http://minio:9000");
  EXPECT_EQ(sa->options().max_attempts, 2);
  EXPECT_EQ(sa->options().prefix, "a");
  EXPECT_EQ(sb->options().endpoint, "http://10.0.0.1:4568");
  EXPECT_EQ(sb->options().max_attempts, 4);
  EXPECT_EQ(sb->options().request_timeout, absl::Milliseconds(2500));  // 10 s / 4 attempts
}

TEST(OpenStore, PlainPathAndFileUrlOpenTheSameLocalStore) {
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  auto by_path = OpenStore(dir + "/agg", S3Options());
  ASSERT_TRUE(by_path.ok()) << by_path.status();
  ASSERT_TRUE((*by_path)->Put("x/y", "v").ok());
  auto by_url = OpenStore("file://" + dir + "/agg/", S3Options());
  ASSERT_TRUE(by_url.ok()) << by_url.status();
  EXPECT_EQ(*(*by_url)->Get("x/y"), "v");
}

TEST(ClassifyLocation, PathsAndFileUrlsAreLocalS3UrlsAreRemote) {
  struct Case {
    const char* location;
    LocationKind kind;
    const char* path_or_url;
  };
  for (const Case& c : {
           Case{"/abs/dir", LocationKind::kLocal, "/abs/dir"},
           Case{"rel/dir", LocationKind::kLocal, "rel/dir"},
           Case{"file:///abs/dir", LocationKind::kLocal, "/abs/dir"},
           Case{"file:///abs/dir/", LocationKind::kLocal, "/abs/dir/"},
           Case{"./a://b", LocationKind::kLocal, "./a://b"},  // no scheme before "://"
           Case{"s3://bucket", LocationKind::kS3, "s3://bucket"},
           Case{"s3://bucket/prefix/x", LocationKind::kS3, "s3://bucket/prefix/x"},
       }) {
    auto loc = ClassifyLocation(c.location);
    ASSERT_TRUE(loc.ok()) << c.location << ": " << loc.status();
    EXPECT_EQ(loc->kind, c.kind) << c.location;
    EXPECT_EQ(loc->path_or_url, c.path_or_url) << c.location;
  }
}

TEST(ClassifyLocation, OtherSchemesAreInvalidArgumentsListingTheSupportedForms) {
  for (const char* bad : {"gs://bucket/x", "http://host/x", "S3://bucket/x", "Gs://b/x",
                          "FILE:///abs", "file://relative", "file://host/x", ""}) {
    auto loc = ClassifyLocation(bad);
    EXPECT_EQ(loc.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(absl::StrContains(loc.status().message(), bad)) << loc.status();
  }
  const absl::Status gs = ClassifyLocation("gs://bucket/x").status();
  EXPECT_TRUE(absl::StrContains(gs.message(), "'gs://'")) << gs;
  EXPECT_TRUE(absl::StrContains(gs.message(), "file:///path")) << gs;
  EXPECT_TRUE(absl::StrContains(gs.message(), "s3://bucket/prefix")) << gs;
  EXPECT_FALSE(absl::StrContains(gs.message(), "lowercase")) << gs;
  const absl::Status upper = ClassifyLocation("S3://bucket/x").status();
  EXPECT_TRUE(absl::StrContains(upper.message(), "use lowercase s3://")) << upper;
}

TEST(ClassifyLocation, MistypedUrlsAreNotRelativeDirectories) {
  for (const char* typo : {"s3:/bucket/ckpt", "s3:bucket", "S3:/b", "file:/abs/dir"}) {
    auto loc = ClassifyLocation(typo);
    EXPECT_EQ(loc.status().code(), absl::StatusCode::kInvalidArgument) << typo;
    EXPECT_TRUE(absl::StrContains(loc.status().message(), "mistyped URL")) << loc.status();
  }
  // A directory that merely starts with those letters is still a path.
  EXPECT_EQ(ClassifyLocation("s3data/x")->kind, LocationKind::kLocal);
  EXPECT_EQ(ClassifyLocation("./s3:/x")->kind, LocationKind::kLocal);
}

TEST(OpenStore, RejectsEmptyAndUnknownSchemes) {
  EXPECT_EQ(OpenStore("", S3Options()).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenStore("gs://bucket/x", S3Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenStore("file://relative", S3Options()).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Not a local directory named "S3:" (a plain path would be created and succeed).
  const absl::Status upper = OpenStore("S3://bucket/x", S3Options()).status();
  EXPECT_EQ(upper.code(), absl::StatusCode::kInvalidArgument) << upper;
  EXPECT_TRUE(absl::StrContains(upper.message(), "lowercase")) << upper;
}

}  // namespace
}  // namespace zephon::storage
