#include "daemon/checkpoint/peer_auth.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "common/temp_dir_testing.h"
#include "gtest/gtest.h"
#include "proto/checkpoint.pb.h"

namespace zephon::checkpoint {
namespace {

const std::string kSecret(40, 'k');

std::string WriteSecret(const std::string& text, mode_t mode) {
  const std::string path = testing::MakeTempDir("peer_auth") + "/secret";
  std::ofstream(path) << text;
  EXPECT_EQ(::chmod(path.c_str(), mode), 0);
  return path;
}

proto::CheckpointReport Report(uint64_t round) {
  proto::CheckpointReport report;
  report.set_run_id("run-1");
  report.set_round(round);
  return report;
}

TEST(PeerAuthTest, ReadsAPrivateSecretFileAndTrimsItsNewline) {
  auto from_file = PeerAuthenticator::FromFile(WriteSecret(kSecret + "\n", 0400));
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  auto from_bytes = PeerAuthenticator::FromSecret(kSecret);
  ASSERT_TRUE(from_bytes.ok());
  // Same secret, same signature for the same request, time and nonce.
  EXPECT_EQ((*from_file)->HeaderFor(kReportMethod, Report(1), 1000, std::string(32, 'a')),
            (*from_bytes)->HeaderFor(kReportMethod, Report(1), 1000, std::string(32, 'a')));
}

TEST(PeerAuthTest, RefusesASecretOtherUsersCanRead) {
  auto auth = PeerAuthenticator::FromFile(WriteSecret(kSecret, 0644));
  ASSERT_FALSE(auth.ok());
  EXPECT_EQ(auth.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(auth.status().message().find("chmod 0400"), std::string::npos) << auth.status();
  EXPECT_NE(auth.status().message().find("0644"), std::string::npos) << auth.status();
}

TEST(PeerAuthTest, RefusesShortSecretsAndMissingFiles) {
  auto short_secret = PeerAuthenticator::FromFile(WriteSecret("tooshort\n", 0400));
  ASSERT_FALSE(short_secret.ok());
  EXPECT_EQ(short_secret.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(short_secret.status().message().find("--peer-secret-file"), std::string::npos);
  auto missing = PeerAuthenticator::FromFile("/nonexistent/zephon/secret");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/zephon/secret"), std::string::npos);
}

TEST(PeerAuthTest, SignaturesBindMethodRequestTimeAndSecret) {
  auto a = *PeerAuthenticator::FromSecret(kSecret);
  auto b = *PeerAuthenticator::FromSecret(std::string(40, 'z'));
  const std::string nonce(32, 'a');
  const std::string base = a->HeaderFor(kReportMethod, Report(1), 1000, nonce);
  EXPECT_NE(base, a->HeaderFor(kStatusMethod, Report(1), 1000, nonce));
  EXPECT_NE(base, a->HeaderFor(kReportMethod, Report(2), 1000, nonce));
  EXPECT_NE(base, a->HeaderFor(kReportMethod, Report(1), 1001, nonce));
  EXPECT_NE(base, b->HeaderFor(kReportMethod, Report(1), 1000, nonce));
}

}  // namespace
}  // namespace zephon::checkpoint
