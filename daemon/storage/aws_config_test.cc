#include "daemon/storage/aws_config.h"

#include <sys/stat.h>

#include <string>

#include "absl/strings/match.h"
#include "daemon/storage/aws_config_testing.h"
#include "gtest/gtest.h"

namespace zephon::storage {
namespace {

// --- ParseAwsIni ---------------------------------------------------------------------

TEST(ParseAwsIni, ToleratesCommentsWhitespaceKeyCaseColonsAndCrlf) {
  const char* text =
      "# leading comment\n"
      "; another\n"
      "\n"
      "[default]\r\n"
      "  AWS_Access_Key_ID   =   AKID  \r\n"
      "aws_secret_access_key:SECRET\n"
      "    # indented comment\n"
      "aws_session_token =\n"
      "[ spaced ]\n"
      "region = eu-west-1 # not a comment\n";
  auto p = ParseAwsIni(text, "creds", AwsIniKind::kCredentials);
  ASSERT_TRUE(p.ok()) << p.status();
  const auto& d = p->at("default");
  EXPECT_EQ(d.at("aws_access_key_id"), "AKID");
  EXPECT_EQ(d.at("aws_secret_access_key"), "SECRET");
  EXPECT_EQ(d.at("aws_session_token"), "");
  EXPECT_EQ(p->at("spaced").at("region"), "eu-west-1 # not a comment");  // as configparser
}

// Why this reader and not Debian's libinih (issue 13): libinih 55 is built with
// INI_MAX_LINE 200 and no realloc, so it cuts an STS session token (typically 600-1300
// characters on one line) after 199 bytes, and it strips " ;..." from values as an
// inline comment, which the AWS CLI (configparser without inline comments) keeps.
TEST(ParseAwsIni, KeepsLongSessionTokensAndSemicolonsInValuesWhole) {
  const std::string token(1300, 'T');
  auto p = ParseAwsIni("[default]\naws_session_token = " + token +
                           "\naws_secret_access_key = abc ;def\n",
                       "creds", AwsIniKind::kCredentials);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->at("default").at("aws_session_token"), token);
  EXPECT_EQ(p->at("default").at("aws_secret_access_key"), "abc ;def");
}

TEST(ParseAwsIni, ConfigFileUsesProfilePrefixAndSkipsOtherSections) {
  const char* text =
      "[default]\nregion = us-west-2\n"
      "[profile  dev]\nregion = eu-central-1\n"
      "s3 =\n  max_concurrent_requests = 20\n  addressing_style = path\n"
      "output = json\n"
      "[sso-session corp]\nsso_region = us-east-1\n"
      "[plain]\nregion = nowhere\n";
  auto p = ParseAwsIni(text, "config", AwsIniKind::kConfig);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->size(), 2u);  // default, dev
  EXPECT_EQ(p->at("default").at("region"), "us-west-2");
  EXPECT_EQ(p->at("dev").at("region"), "eu-central-1");
  EXPECT_EQ(p->at("dev").at("s3"), "");
  EXPECT_EQ(p->at("dev").count("max_concurrent_requests"), 0u);  // nested, not a key
  EXPECT_EQ(p->at("dev").at("output"), "json");
}

TEST(ParseAwsIni, CredentialsFileTakesSectionNamesLiterally) {
  auto p = ParseAwsIni("[profile dev]\naws_access_key_id = A\n", "creds",
                       AwsIniKind::kCredentials);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->count("dev"), 0u);
  EXPECT_EQ(p->count("profile dev"), 1u);
}

TEST(ParseAwsIni, EquallyIndentedKeysAreKeysNotContinuations) {
  auto p = ParseAwsIni("[default]\n  a = 1\n  b = 2\n", "f", AwsIniKind::kCredentials);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->at("default").at("b"), "2");
}

TEST(ParseAwsIni, ErrorsNameFileAndLine) {
  struct Case {
    const char* text;
    const char* where;
    const char* what;
  };
  const Case cases[] = {
      {"aws_access_key_id = A\n", "/x/creds:1:", "before any [section]"},
      {"[default]\n\njust words\n", "/x/creds:3:", "expected 'key = value'"},
      {"[default\n", "/x/creds:1:", "malformed section header"},
      {"[a]\nk=1\n[a]\n", "/x/creds:3:", "section [a] appears twice"},
      {"[a]\nk=1\nK = 2\n", "/x/creds:3:", "key 'k' appears twice"},
      {"[a]\n = 2\n", "/x/creds:2:", "missing key"},
  };
  for (const Case& c : cases) {
    auto p = ParseAwsIni(c.text, "/x/creds", AwsIniKind::kCredentials);
    ASSERT_FALSE(p.ok()) << c.text;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StrContains(p.status().message(), c.where)) << p.status();
    EXPECT_TRUE(absl::StrContains(p.status().message(), c.what)) << p.status();
  }
}

// --- LoadAwsSharedConfig -------------------------------------------------------------

class LoadAwsSharedConfigTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(env_.home().empty()); }
  std::string Creds(const std::string& text) {
    return env_.WriteHomeFile(".aws/credentials", text);
  }
  std::string Config(const std::string& text) {
    return env_.WriteHomeFile(".aws/config", text);
  }
  AwsEnvSandbox env_;
};

TEST_F(LoadAwsSharedConfigTest, NothingConfiguredIsNotAnError) {
  auto c = LoadAwsSharedConfig();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->profile, "default");
  EXPECT_EQ(c->credentials.access_key, "");
  EXPECT_EQ(c->credentials_source, "");
  EXPECT_EQ(c->region, "");
  EXPECT_EQ(c->credentials_file, env_.home() + "/.aws/credentials");
  EXPECT_EQ(c->config_file, env_.home() + "/.aws/config");
}

TEST_F(LoadAwsSharedConfigTest, EnvironmentBeatsFilesAndNeverMixesTheSessionToken) {
  Creds("[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = FILESECRET\n"
        "aws_session_token = FILETOKEN\n");
  env_.Set("AWS_ACCESS_KEY_ID", "ENVKEY");
  env_.Set("AWS_SECRET_ACCESS_KEY", "ENVSECRET");
  auto c = LoadAwsSharedConfig();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->credentials.access_key, "ENVKEY");
  EXPECT_EQ(c->credentials.secret_key, "ENVSECRET");
  EXPECT_EQ(c->credentials.session_token, "");  // not the file's token
  EXPECT_EQ(c->credentials_source, "environment");
  env_.Set("AWS_SESSION_TOKEN", "ENVTOKEN");
  EXPECT_EQ(LoadAwsSharedConfig()->credentials.session_token, "ENVTOKEN");
}

TEST_F(LoadAwsSharedConfigTest, CredentialsFileBeatsConfigFileAndRegionComesFromConfig) {
  const std::string creds = Creds(
      "[default]\naws_access_key_id = CK\naws_secret_access_key = CS\n"
      "aws_session_token = CT\nregion = ignored-in-credentials-file\n");
  Config("[default]\naws_access_key_id = FK\naws_secret_access_key = FS\n"
         "region = ap-south-1\n");
  auto c = LoadAwsSharedConfig();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->credentials.access_key, "CK");
  EXPECT_EQ(c->credentials.secret_key, "CS");
  EXPECT_EQ(c->credentials.session_token, "CT");
  EXPECT_EQ(c->credentials_source, creds + " [default]");
  EXPECT_EQ(c->region, "ap-south-1");
}

TEST_F(LoadAwsSharedConfigTest, ConfigFileCredentialsAreTheLastResort) {
  Creds("[other]\naws_access_key_id = X\naws_secret_access_key = Y\n");
  const std::string config = Config(
      "[profile dev]\naws_access_key_id = FK\naws_secret_access_key = FS\nregion = r1\n");
  env_.Set("AWS_PROFILE", "dev");
  auto c = LoadAwsSharedConfig();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->profile, "dev");
  EXPECT_EQ(c->credentials.access_key, "FK");
  EXPECT_EQ(c->credentials_source, config + " [profile dev]");
  EXPECT_EQ(c->region, "r1");
}

TEST_F(LoadAwsSharedConfigTest, AwsProfileSelectsTheCredentialsSection) {
  Creds("[default]\naws_access_key_id = D\naws_secret_access_key = DS\n"
        "[prod]\naws_access_key_id = P\naws_secret_access_key = PS\n");
  env_.Set("AWS_PROFILE", "prod");
  auto c = LoadAwsSharedConfig();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->credentials.access_key, "P");
  EXPECT_EQ(c->region, "");  // no config file
}

TEST_F(LoadAwsSharedConfigTest, RequestedProfileMissingFromBothFilesNamesProfileAndFiles) {
  const std::string creds =
      Creds("[default]\naws_access_key_id = D\naws_secret_access_key = S\n");
  env_.Set("AWS_PROFILE", "staging");
  env_.Set("AWS_ACCESS_KEY_ID", "ENVKEY");  // as the CLI: a named profile must exist
  env_.Set("AWS_SECRET_ACCESS_KEY", "ENVSECRET");
  auto c = LoadAwsSharedConfig();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(c.status().message());
  EXPECT_TRUE(absl::StrContains(msg, "'staging'")) << msg;
  EXPECT_TRUE(absl::StrContains(msg, "AWS_PROFILE")) << msg;
  EXPECT_TRUE(absl::StrContains(msg, creds)) << msg;
  EXPECT_TRUE(absl::StrContains(msg, env_.home() + "/.aws/config (missing)")) << msg;
}

TEST_F(LoadAwsSharedConfigTest, HalfAKeyPairInAFileNamesFileAndProfile) {
  const std::string creds = Creds("[default]\naws_access_key_id = ONLYKEY\n");
  Config("[default]\naws_access_key_id = FK\naws_secret_access_key = FS\n");
  auto c = LoadAwsSharedConfig();
  ASSERT_FALSE(c.ok());  // no silent fall-through to the config file
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(c.status().message(), creds)) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "'default'")) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), "no aws_secret_access_key"))
      << c.status();
}

TEST_F(LoadAwsSharedConfigTest, HalfAKeyPairInTheEnvironmentNamesTheVariable) {
  env_.Set("AWS_SECRET_ACCESS_KEY", "S");
  auto c = LoadAwsSharedConfig();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(c.status().message(), "AWS_ACCESS_KEY_ID is empty"))
      << c.status();
}

TEST_F(LoadAwsSharedConfigTest, FileVariablesOverrideTheDefaultsWithTildeExpansion) {
  env_.WriteHomeFile("my-creds",
                     "[default]\naws_access_key_id = K\naws_secret_access_key = S\n");
  env_.WriteHomeFile("my-config", "[default]\nregion = sa-east-1\n");
  Creds("[default]\naws_access_key_id = NOT-THIS\naws_secret_access_key = S\n");
  env_.Set("AWS_SHARED_CREDENTIALS_FILE", "~/my-creds");
  env_.Set("AWS_CONFIG_FILE", env_.home() + "/my-config");
  auto c = LoadAwsSharedConfig();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->credentials.access_key, "K");
  EXPECT_EQ(c->credentials_file, env_.home() + "/my-creds");
  EXPECT_EQ(c->region, "sa-east-1");
}

TEST_F(LoadAwsSharedConfigTest, EnvironmentKeysSkipAMalformedCredentialsFile) {
  Creds("[default]\naws_access_key_id = A\n[default]\n");  // section twice: malformed
  Config("[default]\nregion = eu-north-1\n");
  env_.Set("AWS_ACCESS_KEY_ID", "ENVKEY");
  env_.Set("AWS_SECRET_ACCESS_KEY", "ENVSECRET");
  auto c = LoadAwsSharedConfig();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->credentials.access_key, "ENVKEY");
  EXPECT_EQ(c->credentials_source, "environment");
  EXPECT_EQ(c->region, "eu-north-1");  // the config file is still read for the region
}

TEST_F(LoadAwsSharedConfigTest, AMalformedConfigFileFailsOnlyWhenItIsNeeded) {
  const std::string config = Config("region = before any section\n");
  env_.Set("AWS_ACCESS_KEY_ID", "ENVKEY");
  env_.Set("AWS_SECRET_ACCESS_KEY", "ENVSECRET");
  auto c = LoadAwsSharedConfig({/*credentials=*/true, /*region=*/false});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->credentials.access_key, "ENVKEY");
  EXPECT_EQ(c->region, "");
  c = LoadAwsSharedConfig();  // the region is needed: the broken file matters
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(c.status().message(), config + ":1:")) << c.status();
  // Credentials from the credentials file also leave the config file unread.
  env_.Set("AWS_ACCESS_KEY_ID", "");
  env_.Set("AWS_SECRET_ACCESS_KEY", "");
  Creds("[default]\naws_access_key_id = CK\naws_secret_access_key = CS\n");
  c = LoadAwsSharedConfig({/*credentials=*/true, /*region=*/false});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->credentials.access_key, "CK");
}

TEST_F(LoadAwsSharedConfigTest, CallerCredentialsLeaveTheCredentialsFileUnread) {
  Creds("garbage\n");
  Config("[default]\nregion = us-west-1\n");
  env_.Set("AWS_SECRET_ACCESS_KEY", "half a pair: not looked at either");
  auto c = LoadAwsSharedConfig({/*credentials=*/false, /*region=*/true});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->credentials.access_key, "");
  EXPECT_EQ(c->region, "us-west-1");
}

TEST_F(LoadAwsSharedConfigTest, ANamedProfileReadsBothFilesEvenWithEnvironmentKeys) {
  const std::string creds = Creds("[ci]\n???\n");
  Config("[profile ci]\nregion = r\n");
  env_.Set("AWS_ACCESS_KEY_ID", "ENVKEY");
  env_.Set("AWS_SECRET_ACCESS_KEY", "ENVSECRET");
  env_.Set("AWS_PROFILE", "ci");
  auto c = LoadAwsSharedConfig();
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), creds + ":2:")) << c.status();
}

TEST_F(LoadAwsSharedConfigTest, MalformedOrUnreadableFilesAreNamed) {
  const std::string config = Config("[default]\nregion us-east-1\n");
  auto c = LoadAwsSharedConfig();
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(c.status().message(), config + ":2:")) << c.status();

  // A directory where the file should be: exists but cannot be read (works as root,
  // unlike chmod 000).
  const std::string dir = env_.home() + "/creds-dir";
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  env_.Set("AWS_SHARED_CREDENTIALS_FILE", dir);
  c = LoadAwsSharedConfig();
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), "cannot read AWS shared file '" + dir))
      << c.status();
}

}  // namespace
}  // namespace zephon::storage
