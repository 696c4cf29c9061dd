#include "daemon/checkpoint/checkpoint_file.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "daemon/checkpoint/round_testing.h"
#include "gtest/gtest.h"

namespace zephon::checkpoint {
namespace {

using testing::MessageHas;

proto::CheckpointState SampleState() {
  proto::CheckpointState state;
  state.set_format_version(kCheckpointFormatVersion);
  state.set_run_id("run-1");
  state.set_spec_hash("abc123");
  state.set_canonical_replicas(4);
  state.set_seed(1234);
  state.set_round(7);
  state.set_world_size(2);
  state.set_dp_degree(2);
  state.set_created_unix_ms(1700000000000);
  uint64_t total = 0;
  for (uint32_t lane = 0; lane < 4; ++lane) {
    proto::LaneProgress* l = state.add_lanes();
    l->set_lane(lane);
    l->set_next_batch_index(10 + lane);
    l->set_flush_group_chunk(lane * 3);
    l->set_records_into_group(lane * 5);
    total += l->next_batch_index();
  }
  state.set_total_batches(total);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    proto::RankProgress* r = state.add_ranks();
    r->set_global_rank(rank);
    r->set_dp_degree(2);
    r->set_dp_group_id(rank);
    r->set_taken(21);
    r->set_daemon("node-a");
  }
  return state;
}

std::string MakeTempDir() { return testing::MakeTempDir("ckpt"); }

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

void PatchU32(std::string* bytes, size_t offset, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*bytes)[offset + i] = static_cast<char>(v >> (8 * i));
}

TEST(CheckpointFileTest, RoundTripPreservesEveryField) {
  const proto::CheckpointState state = SampleState();
  const std::string bytes = EncodeCheckpoint(state);
  absl::StatusOr<proto::CheckpointState> decoded = DecodeCheckpoint(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->DebugString(), state.DebugString());
}

TEST(CheckpointFileTest, EncodingIsDeterministicWithDocumentedHeader) {
  const std::string bytes = EncodeCheckpoint(SampleState());
  EXPECT_EQ(bytes, EncodeCheckpoint(SampleState()));
  ASSERT_GE(bytes.size(), kCheckpointHeaderBytes);
  EXPECT_EQ(bytes.substr(0, 8), "ZEPHCKPT");
  EXPECT_EQ(bytes[8], 1);    // format_version, little-endian
  EXPECT_EQ(bytes[12], 32);  // header_bytes
  EXPECT_EQ(static_cast<unsigned char>(bytes[16]), bytes.size() - kCheckpointHeaderBytes);
  EXPECT_EQ(bytes.substr(28, 4), std::string(4, '\0'));  // reserved
}

TEST(CheckpointFileTest, FlippedPayloadByteIsDataLoss) {
  std::string bytes = EncodeCheckpoint(SampleState());
  bytes[kCheckpointHeaderBytes + 5] ^= 0x40;
  absl::StatusOr<proto::CheckpointState> decoded = DecodeCheckpoint(bytes);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(MessageHas(decoded.status(), "checksum mismatch"));
}

TEST(CheckpointFileTest, TruncatedHeaderIsDataLoss) {
  const std::string bytes = EncodeCheckpoint(SampleState());
  absl::StatusOr<proto::CheckpointState> decoded = DecodeCheckpoint(bytes.substr(0, 20));
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(MessageHas(decoded.status(), "truncated"));
}

TEST(CheckpointFileTest, TruncatedPayloadIsDataLoss) {
  const std::string bytes = EncodeCheckpoint(SampleState());
  absl::StatusOr<proto::CheckpointState> decoded =
      DecodeCheckpoint(bytes.substr(0, bytes.size() - 3));
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(MessageHas(decoded.status(), "truncated"));
}

TEST(CheckpointFileTest, TrailingBytesAreDataLoss) {
  const std::string bytes = EncodeCheckpoint(SampleState()) + "xx";
  EXPECT_EQ(DecodeCheckpoint(bytes).status().code(), absl::StatusCode::kDataLoss);
}

TEST(CheckpointFileTest, WrongMagicIsNotAZephonCheckpoint) {
  std::string bytes = EncodeCheckpoint(SampleState());
  bytes[0] = 'X';
  for (const std::string& input : {bytes, std::string(), std::string("{\"json\": 1}")}) {
    absl::StatusOr<proto::CheckpointState> decoded = DecodeCheckpoint(input);
    EXPECT_EQ(decoded.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(MessageHas(decoded.status(), "not a Zephon checkpoint"));
  }
}

TEST(CheckpointFileTest, NewerHeaderVersionIsRefused) {
  std::string bytes = EncodeCheckpoint(SampleState());
  PatchU32(&bytes, 8, 99);
  absl::StatusOr<proto::CheckpointState> decoded = DecodeCheckpoint(bytes);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(MessageHas(decoded.status(),
                         "checkpoint format version 99 is newer than this zephond (1)"));
}

TEST(CheckpointFileTest, NewerPayloadVersionIsRefused) {
  proto::CheckpointState state = SampleState();
  state.set_format_version(99);
  std::string bytes = EncodeCheckpoint(state);
  PatchU32(&bytes, 8, 1);  // header claims 1; the CRC covers only the payload
  absl::StatusOr<proto::CheckpointState> decoded = DecodeCheckpoint(bytes);
  EXPECT_EQ(decoded.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(MessageHas(decoded.status(), "format version 99 is newer"));
}

TEST(CheckpointFileTest, NonZeroReservedFieldIsDataLoss) {
  proto::CheckpointState state = SampleState();
  std::string bytes = EncodeCheckpoint(state);
  PatchU32(&bytes, 28, 7);  // reserved must be 0
  EXPECT_EQ(DecodeCheckpoint(bytes).status().code(), absl::StatusCode::kDataLoss);
}

TEST(WriteFileAtomicallyTest, CreatesParentsAndLeavesNoTemporaryFiles) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/a/b/file.zckpt";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second").ok());
  EXPECT_EQ(*ReadFile(path), "second");
  EXPECT_EQ(ListDir(dir + "/a/b"), std::vector<std::string>{"file.zckpt"});
}

// A write that fails midway (here: file size limit, as a full disk would) leaves the
// previous content and no temporary file. Works as root, unlike a read-only directory.
TEST(WriteFileAtomicallyTest, FailedWriteKeepsOldContentAndNoTemporary) {
  const std::string dir = MakeTempDir();
  const std::string path = dir + "/file";
  ASSERT_TRUE(WriteFileAtomically(path, "old").ok());
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 100;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const absl::Status status = WriteFileAtomically(path, std::string(10000, 'x'));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(MessageHas(status, path));
  EXPECT_EQ(*ReadFile(path), "old");
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"file"});
}

TEST(WriteFileAtomicallyTest, FailedWriteLeavesNoTargetWhenThereWasNone) {
  const std::string dir = MakeTempDir();
  struct rlimit saved;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
  ::signal(SIGXFSZ, SIG_IGN);
  struct rlimit small = saved;
  small.rlim_cur = 100;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  const absl::Status status = WriteFileAtomically(dir + "/file", std::string(10000, 'x'));
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &saved), 0);
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(ListDir(dir).empty());
}

TEST(WriteFileAtomicallyTest, FailedRenameRemovesTemporary) {
  const std::string dir = MakeTempDir();
  // The target is a non-empty directory: rename(2) fails after the data was written.
  std::filesystem::create_directories(dir + "/target/inner");
  const absl::Status status = WriteFileAtomically(dir + "/target", "data");
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(MessageHas(status, "rename"));
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"target"});
}

TEST(WriteFileAtomicallyTest, ParentThatIsAFileIsAnError) {
  const std::string dir = MakeTempDir();
  ASSERT_TRUE(WriteFileAtomically(dir + "/plain", "x").ok());
  const absl::Status status = WriteFileAtomically(dir + "/plain/sub/file", "data");
  EXPECT_FALSE(status.ok());
  EXPECT_TRUE(MessageHas(status, "cannot create directory"));
  EXPECT_EQ(ListDir(dir), std::vector<std::string>{"plain"});
}

TEST(WriteFileAtomicallyTest, ReadOnlyDirectoryIsPermissionDenied) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  const std::string dir = MakeTempDir();
  ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
  const absl::Status status = WriteFileAtomically(dir + "/file", "data");
  ::chmod(dir.c_str(), 0755);
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(ListDir(dir).empty());
}

}  // namespace
}  // namespace zephon::checkpoint
