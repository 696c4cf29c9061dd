#include "daemon/storage/s3_flags.h"

#include <vector>

#include "daemon/storage/s3_store.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

// Parses `args` (after the program name) into S3Flags.
S3Flags Parse(std::vector<std::string> args) {
  CLI::App app;
  S3Flags flags;
  AddS3Flags(app, &flags);
  std::vector<const char*> argv = {"prog"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), argv.data());
  return flags;
}

TEST(S3FlagsTest, FlagsBecomeS3Options) {
  const S3Flags flags = Parse({"--s3-endpoint", "http://minio:9000", "--s3-region", "eu-1",
                               "--s3-addressing", "virtual", "--s3-timeout-ms", "2500",
                               "--s3-attempts", "3"});
  absl::StatusOr<S3Options> options = S3OptionsFromFlags(flags);
  ASSERT_TRUE(options.ok()) << options.status();
  const S3Options& d = *options;
  EXPECT_EQ(d.endpoint, "http://minio:9000");
  EXPECT_EQ(d.region, "eu-1");
  EXPECT_EQ(d.path_style, false);
  EXPECT_EQ(d.request_timeout, absl::Milliseconds(2500));
  EXPECT_LE(d.connect_timeout, d.request_timeout);
  EXPECT_EQ(d.max_attempts, 3);
  absl::StatusOr<S3Options> unset = S3OptionsFromFlags(Parse({}));  // environment decides
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_EQ(unset->endpoint, "");
  EXPECT_FALSE(unset->path_style.has_value());
  EXPECT_EQ(unset->max_attempts, 4);
}

TEST(S3FlagsTest, BadEndpointsAndValuesAreRejectedNamingTheFlag) {
  for (const char* bad : {"minio:9000", "ftp://h", "http://", "http://h/path", "http://:9000",
                          "https://user@h"}) {
    S3Flags flags;
    flags.endpoint = bad;
    const absl::Status s = S3OptionsFromFlags(flags).status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("--s3-endpoint"), absl::string_view::npos) << s;
  }
  S3Flags ok;
  ok.endpoint = "https://s3.example.com:443/";
  EXPECT_TRUE(S3OptionsFromFlags(ok).ok());
  EXPECT_THROW(Parse({"--s3-addressing", "sideways"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--s3-attempts", "0"}), CLI::ValidationError);
}

}  // namespace
}  // namespace zephon::storage
