#include "daemon/daemon_flags.h"

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/paths.h"
#include "daemon/exec/worker_pool.h"
#include "daemon/pipeline/formats/jsonl_reader.h"
#include "gtest/gtest.h"

namespace zephon::daemon {
namespace {

// Parses `args` (without the program name) as zephond would.
DaemonFlags Parse(std::vector<std::string> args) {
  CLI::App app;
  DaemonFlags flags = DaemonFlags::Defaults();
  AddDaemonFlags(app, &flags);
  std::vector<const char*> argv = {"zephond"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  app.parse(static_cast<int>(argv.size()), const_cast<char**>(argv.data()));
  return flags;
}

bool Has(const absl::Status& status, const std::string& text) {
  return status.message().find(text) != absl::string_view::npos;
}

TEST(DaemonFlagsTest, DefaultsAreTheDocumentedOnes) {
  const DaemonFlags flags = Parse({});
  EXPECT_EQ(flags.socket_path, DefaultSocketPath());
  EXPECT_EQ(flags.shm_prefix, "");
  EXPECT_EQ(flags.shm_mode_text, "0600");
  EXPECT_EQ(flags.log_level, "info");
  EXPECT_EQ(flags.idle_exit_s, 0);
  EXPECT_EQ(flags.prefetch_batches, 8u);
  EXPECT_EQ(flags.max_ring_bytes, 0u);
  EXPECT_EQ(flags.worker_threads, exec::DefaultWorkerThreads());
  EXPECT_EQ(flags.max_jsonl_line_bytes, pipeline::kDefaultMaxLineBytes);
  EXPECT_EQ(flags.shard_cache_bytes, uint64_t{16} << 30);
  EXPECT_EQ(flags.token_cache_bytes, uint64_t{64} << 30);
  EXPECT_EQ(flags.shard_cache_block_bytes, uint64_t{8} << 20);
  EXPECT_EQ(flags.metrics_address, "127.0.0.1:0");
  EXPECT_EQ(flags.peer_address, "");
  EXPECT_FALSE(flags.peer_insecure);
  EXPECT_TRUE(ValidateDaemonFlags(flags).ok());
}

TEST(DaemonFlagsTest, CommandLineFillsTheStruct) {
  const DaemonFlags flags =
      Parse({"--socket", "/tmp/z.sock", "--worker-threads", "3", "--peer-address",
             "0.0.0.0:7000", "--peer-insecure", "--log-level", "debug"});
  EXPECT_EQ(flags.socket_path, "/tmp/z.sock");
  EXPECT_EQ(flags.worker_threads, 3u);
  EXPECT_EQ(flags.peer_address, "0.0.0.0:7000");
  EXPECT_TRUE(flags.peer_insecure);
  EXPECT_EQ(flags.log_level, "debug");
  EXPECT_TRUE(ValidateDaemonFlags(flags).ok());
  EXPECT_EQ(Parse({"--token-cache-bytes", "0"}).token_cache_bytes, 0u);
}

TEST(DaemonFlagsTest, CliChecksRefuseOutOfRangeValues) {
  EXPECT_THROW(Parse({"--log-level", "loud"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--shard-cache-block-bytes", "100"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--max-jsonl-line-bytes", "0"}), CLI::ValidationError);
  EXPECT_THROW(Parse({"--no-such-flag"}), CLI::ParseError);
}

TEST(DaemonFlagsTest, UnknownShmGroupNamesTheGroupAndTheFix) {
  DaemonFlags flags = DaemonFlags::Defaults();
  flags.shm_group = "zephon-no-such-group";
  const absl::Status status = ValidateDaemonFlags(flags);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(Has(status, "--shm-group=zephon-no-such-group: no such group")) << status;
  EXPECT_TRUE(Has(status, "groupadd zephon-no-such-group")) << status;
}

TEST(DaemonFlagsTest, ShmModeMustBeOctal) {
  DaemonFlags flags = DaemonFlags::Defaults();
  flags.shm_mode_text = "rw";
  const absl::Status status = ValidateDaemonFlags(flags);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(Has(status, "--shm-mode=rw is not an octal permission")) << status;
  flags.shm_mode_text = "0660";  // accepted (and warned about at start)
  EXPECT_TRUE(ValidateDaemonFlags(flags).ok());
}

TEST(DaemonFlagsTest, PeerInsecureContradictsEitherAuthentication) {
  DaemonFlags flags = DaemonFlags::Defaults();
  flags.peer_insecure = true;
  flags.peer_secret_file = "/etc/zephon/secret";
  absl::Status status = ValidateDaemonFlags(flags);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(Has(status, "--peer-insecure contradicts")) << status;

  flags.peer_secret_file.clear();
  flags.peer_tls.ca_file = "/etc/zephon/ca.pem";
  status = ValidateDaemonFlags(flags);
  EXPECT_TRUE(Has(status, "--peer-insecure contradicts")) << status;
}

TEST(DaemonFlagsTest, PeerAddressNeedsAuthenticationOrInsecure) {
  DaemonFlags flags = DaemonFlags::Defaults();
  flags.peer_address = "0.0.0.0:7000";
  const absl::Status status = ValidateDaemonFlags(flags);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(Has(status, "--peer-address=0.0.0.0:7000 would let anyone")) << status;
  EXPECT_TRUE(Has(status, "--peer-secret-file")) << status;

  flags.peer_secret_file = "/etc/zephon/secret";
  EXPECT_TRUE(ValidateDaemonFlags(flags).ok());
  flags.peer_secret_file.clear();
  flags.peer_tls.ca_file = "/etc/zephon/ca.pem";
  EXPECT_TRUE(ValidateDaemonFlags(flags).ok());
  flags.peer_tls.ca_file.clear();
  flags.peer_insecure = true;
  EXPECT_TRUE(ValidateDaemonFlags(flags).ok());
}

}  // namespace
}  // namespace zephon::daemon
