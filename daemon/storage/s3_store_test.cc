// S3Store::Open's configuration resolution (no server needed; Open does not connect).
// The protocol itself is tested against s3rver in tests/s3.
#include "daemon/storage/s3_store.h"

#include <stdlib.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/strings/match.h"
#include "daemon/storage/aws_config_testing.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

class S3StoreOpenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(env_.home().empty());
    env_.Set("AWS_ENDPOINT_URL", "http://127.0.0.1:1");
  }
  absl::StatusOr<std::unique_ptr<S3Store>> Open() {
    S3Options o;
    o.bucket = "bkt";
    o.region = option_region_;
    return S3Store::Open(o);
  }
  AwsEnvSandbox env_;
  std::string option_region_;
};

TEST_F(S3StoreOpenTest, RegionPrecedenceIsOptionEnvDefaultEnvConfigFileThenUsEast1) {
  env_.Set("AWS_ACCESS_KEY_ID", "K");
  env_.Set("AWS_SECRET_ACCESS_KEY", "S");
  auto s = Open();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->options().region, "us-east-1");
  env_.WriteHomeFile(".aws/config", "[default]\nregion = from-config\n");
  EXPECT_EQ((*Open())->options().region, "from-config");
  env_.Set("AWS_DEFAULT_REGION", "from-default-region");
  EXPECT_EQ((*Open())->options().region, "from-default-region");
  env_.Set("AWS_REGION", "from-region");
  EXPECT_EQ((*Open())->options().region, "from-region");
  option_region_ = "from-option";
  EXPECT_EQ((*Open())->options().region, "from-option");
}

TEST_F(S3StoreOpenTest, CredentialsComeFromTheSharedFileWithSessionToken) {
  env_.WriteHomeFile(".aws/credentials",
                     "[ci]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n"
                     "aws_session_token = FILETOKEN\n");
  env_.Set("AWS_PROFILE", "ci");
  auto s = Open();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->options().credentials.access_key, "FILEKEY");
  EXPECT_EQ((*s)->options().credentials.secret_key, "FILESECRET");
  EXPECT_EQ((*s)->options().credentials.session_token, "FILETOKEN");
}

TEST_F(S3StoreOpenTest, OpenUrlStartsFromTheGivenDefaults) {
  env_.Set("AWS_ACCESS_KEY_ID", "K");
  env_.Set("AWS_SECRET_ACCESS_KEY", "S");
  env_.Set("AWS_REGION", "env-region");
  S3Options defaults;
  defaults.bucket = "ignored";
  defaults.endpoint = "http://10.1.2.3:9000";
  defaults.path_style = false;
  defaults.max_attempts = 7;
  defaults.request_timeout = absl::Seconds(3);
  defaults.credentials.access_key = "IGNORED";
  auto s = S3Store::OpenUrl("s3://real-bucket/pre/fix", defaults);
  ASSERT_TRUE(s.ok()) << s.status();
  const S3Options& o = (*s)->options();
  EXPECT_EQ(o.bucket, "real-bucket");
  EXPECT_EQ(o.prefix, "pre/fix");
  EXPECT_EQ(o.endpoint, "http://10.1.2.3:9000");  // over AWS_ENDPOINT_URL
  EXPECT_EQ(o.path_style, false);
  EXPECT_EQ(o.max_attempts, 7);
  EXPECT_EQ(o.request_timeout, absl::Seconds(3));
  EXPECT_EQ(o.region, "env-region");  // left unset: still from the environment
  EXPECT_EQ(o.credentials.access_key, "K");  // never from the defaults
}

TEST_F(S3StoreOpenTest, ACallBudgetShrinksThePerAttemptTimeout) {
  env_.Set("AWS_ACCESS_KEY_ID", "K");
  env_.Set("AWS_SECRET_ACCESS_KEY", "S");
  auto unbounded = S3Store::OpenUrl("s3://bkt/p", S3Options());
  ASSERT_TRUE(unbounded.ok()) << unbounded.status();
  EXPECT_EQ((*unbounded)->options().request_timeout, absl::Seconds(60));
  auto bounded = S3Store::OpenUrl("s3://bkt/p", S3Options(), absl::Seconds(8));  // 4 attempts
  ASSERT_TRUE(bounded.ok()) << bounded.status();
  EXPECT_EQ((*bounded)->options().request_timeout, absl::Seconds(2));
  EXPECT_LE((*bounded)->options().connect_timeout, absl::Seconds(2));
  EXPECT_EQ((*S3Store::OpenUrl("s3://bkt", S3Options(), absl::Milliseconds(10)))
                ->options()
                .request_timeout,
            absl::Seconds(1));  // never below 1 s
}

TEST_F(S3StoreOpenTest, NoCredentialsNamesTheVariablesAndTheFile) {
  auto s = Open();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(s.status().message());
  EXPECT_TRUE(absl::StrContains(msg, "s3://bkt")) << msg;
  EXPECT_TRUE(absl::StrContains(msg, "AWS_ACCESS_KEY_ID")) << msg;
  EXPECT_TRUE(absl::StrContains(msg, env_.home() + "/.aws/credentials")) << msg;
}

TEST_F(S3StoreOpenTest, SharedFileErrorsNameTheBucket) {
  env_.Set("AWS_PROFILE", "nope");
  auto s = Open();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "s3://bkt")) << s.status();
  EXPECT_TRUE(absl::StrContains(s.status().message(), "'nope'")) << s.status();
}

TEST_F(S3StoreOpenTest, ExplicitOptionsNeedNoSharedFiles) {
  env_.WriteHomeFile(".aws/config", "garbage that does not parse\n");
  S3Options o;
  o.bucket = "bkt";
  o.region = "r";
  o.credentials = {"K", "S", ""};
  auto s = S3Store::Open(o);  // the broken file is never read
  ASSERT_TRUE(s.ok()) << s.status();
  o.credentials = {};
  s = S3Store::Open(o);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.status().message(), "/.aws/config:1:")) << s.status();
}

TEST_F(S3StoreOpenTest, DottedBucketOverHttpsDefaultsToPathStyle) {
  env_.Set("AWS_ACCESS_KEY_ID", "K");
  env_.Set("AWS_SECRET_ACCESS_KEY", "S");
  unsetenv("AWS_ENDPOINT_URL");  // AWS itself: https://s3.<region>.amazonaws.com
  auto open = [](const std::string& bucket, const std::string& endpoint,
                 std::optional<bool> path_style) {
    S3Options o;
    o.bucket = bucket;
    o.endpoint = endpoint;
    o.path_style = path_style;
    absl::StatusOr<std::unique_ptr<S3Store>> s = S3Store::Open(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? (*s)->options().path_style : std::nullopt;
  };
  // *.s3.<region>.amazonaws.com cannot cover "my.bucket.s3...": path style.
  EXPECT_EQ(open("my.bucket", "", std::nullopt), true);
  EXPECT_EQ(open("my-bucket", "", std::nullopt), false);  // virtual host, as AWS prefers
  EXPECT_EQ(open("my.bucket", "https://s3.example.com", std::nullopt), true);
  EXPECT_EQ(open("my.bucket", "", false), false);  // an explicit choice is kept
  EXPECT_EQ(open("my-bucket", "", true), true);
  S3Options defaults;
  defaults.region = "eu-west-1";
  auto s = S3Store::OpenUrl("s3://logs.example.org/run1", defaults);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->options().endpoint, "https://s3.eu-west-1.amazonaws.com");
  EXPECT_EQ((*s)->options().path_style, true);
}

TEST_F(S3StoreOpenTest, EnvironmentKeysIgnoreAMalformedCredentialsFile) {
  env_.WriteHomeFile(".aws/credentials", "this is not INI\n");
  env_.Set("AWS_ACCESS_KEY_ID", "ENVKEY");
  env_.Set("AWS_SECRET_ACCESS_KEY", "ENVSECRET");
  auto s = Open();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->options().credentials.access_key, "ENVKEY");
  EXPECT_EQ((*s)->options().region, "us-east-1");
  // The config file is read for the region only when nothing else sets it.
  env_.WriteHomeFile(".aws/config", "neither\n");
  s = Open();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.status().message(), "/.aws/config:1:")) << s.status();
  env_.Set("AWS_REGION", "r");
  s = Open();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->options().region, "r");
  // A named profile must exist, so AWS_PROFILE makes both files matter again.
  env_.Set("AWS_PROFILE", "ci");
  s = Open();
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.status().message(), "/.aws/credentials:1:")) << s.status();
}

TEST_F(S3StoreOpenTest, ExplicitCredentialsNeedOnlyTheConfigFileForTheRegion) {
  env_.WriteHomeFile(".aws/credentials", "this is not INI\n");
  env_.WriteHomeFile(".aws/config", "[default]\nregion = from-config\n");
  S3Options o;
  o.bucket = "bkt";
  o.credentials = {"K", "S", ""};
  auto s = S3Store::Open(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->options().region, "from-config");
  EXPECT_EQ((*s)->options().credentials.access_key, "K");
}

}  // namespace
}  // namespace zephon::storage
