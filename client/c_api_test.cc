// The C ABI without a daemon: its version and struct_size checks (zephon_next checks the
// caller's zephon_batch before it touches the reader) and offline checkpoint decoding.
#include "client/c_api.h"

#include <dirent.h>

#include <cstddef>
#include <cstring>
#include <string>

#include <gtest/gtest.h>

#include "absl/time/clock.h"
#include "daemon/checkpoint/checkpoint_file.h"

namespace {

constexpr int kInvalidArgument = 3;
constexpr int kFailedPrecondition = 9;

// Calls zephon_next on no reader with `batch` and returns {code, error message}.
std::pair<int, std::string> NextInto(zephon_batch* batch) {
  char* error = nullptr;
  const int code = zephon_next(nullptr, 0.1, batch, &error);
  std::string message = error != nullptr ? error : "";
  zephon_free(error);
  return {code, message};
}

// The threads of this process now (/proc/self/task).
int ThreadCount() {
  DIR* dir = opendir("/proc/self/task");
  if (dir == nullptr) return -1;
  int n = 0;
  while (const dirent* entry = readdir(dir)) {
    if (entry->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

TEST(CApiTest, WarmUpLeavesNoThreadBehind) {
  // gRPC started and stopped inside the call: a process may fork after it as before.
  const int before = ThreadCount();
  ASSERT_GT(before, 0);
  zephon_warm_up();
  zephon_warm_up();  // harmless again
  // A thread gRPC detached at its shutdown may still be leaving /proc/self/task for a
  // moment after the call returns (seen once in ~100 runs): gone within the deadline.
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  while (ThreadCount() != before && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(ThreadCount(), before);
}

TEST(CApiTest, ReportsTheHeadersVersion) {
  EXPECT_EQ(zephon_c_api_version(), static_cast<uint32_t>(ZEPHON_C_API_VERSION));
}

TEST(CApiTest, StructSizeComesFirst) {
  // Every future layout keeps struct_size at offset 0, so any version can read it.
  EXPECT_EQ(offsetof(zephon_batch, struct_size), 0u);
}

TEST(CApiTest, MatchingStructSizePassesTheCheck) {
  zephon_batch batch;
  std::memset(&batch, 0, sizeof(batch));
  batch.struct_size = sizeof(batch);
  auto [code, message] = NextInto(&batch);
  // Past the size check, the next one is the reader's.
  EXPECT_EQ(code, kInvalidArgument);
  EXPECT_NE(message.find("reader is NULL"), std::string::npos) << message;
}

TEST(CApiTest, UnsetStructSizeIsRefused) {
  zephon_batch batch;
  std::memset(&batch, 0, sizeof(batch));
  auto [code, message] = NextInto(&batch);
  EXPECT_EQ(code, kInvalidArgument);
  EXPECT_NE(message.find("zephon_batch.struct_size is 0"), std::string::npos) << message;
  EXPECT_NE(message.find("set struct_size = sizeof(zephon_batch)"), std::string::npos)
      << message;
}

TEST(CApiTest, OlderCallersSmallerStructIsRefused) {
  zephon_batch batch;
  std::memset(&batch, 0, sizeof(batch));
  batch.struct_size = sizeof(batch) - sizeof(zephon_tensor);  // one tensor fewer
  auto [code, message] = NextInto(&batch);
  EXPECT_EQ(code, kInvalidArgument);
  EXPECT_NE(message.find(std::to_string(sizeof(batch) - sizeof(zephon_tensor))),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("-byte zephon_batch"), std::string::npos) << message;
  EXPECT_NE(message.find("C API version " + std::to_string(ZEPHON_C_API_VERSION)),
            std::string::npos)
      << message;
}

TEST(CApiTest, NewerCallersLargerStructIsRefused) {
  // A newer caller's batch with a field appended: the library must not guess its layout.
  struct {
    zephon_batch batch;
    uint64_t appended;
  } newer;
  std::memset(&newer, 0, sizeof(newer));
  newer.batch.struct_size = sizeof(newer);
  auto [code, message] = NextInto(&newer.batch);
  EXPECT_EQ(code, kFailedPrecondition);
  EXPECT_NE(message.find("newer c_api.h"), std::string::npos) << message;
  EXPECT_EQ(newer.appended, 0u);  // nothing written
}

TEST(CApiTest, NullBatchIsRefused) {
  char* error = nullptr;
  EXPECT_EQ(zephon_next(nullptr, 0.1, nullptr, &error), kInvalidArgument);
  ASSERT_NE(error, nullptr);
  EXPECT_NE(std::string(error).find("out (the zephon_batch) is NULL"), std::string::npos);
  zephon_free(error);
}

// zephon_inspect_checkpoint on `bytes`: {code, json or error message}.
std::pair<int, std::string> Inspect(const std::string& bytes) {
  char* json = nullptr;
  char* error = nullptr;
  const int code = zephon_inspect_checkpoint(bytes.data(), bytes.size(), &json, &error);
  std::string out = code == 0 ? json : error;
  zephon_free(json);
  zephon_free(error);
  return {code, out};
}

TEST(CApiTest, InspectCheckpointDecodesTheStateAsJson) {
  zephon::proto::CheckpointState state;
  state.set_format_version(zephon::checkpoint::kCheckpointFormatVersion);
  state.set_run_id("run-7");
  state.set_round(3);
  state.set_canonical_replicas(2);
  state.add_lanes()->set_next_batch_index(5);
  const auto [code, json] = Inspect(zephon::checkpoint::EncodeCheckpoint(state));
  ASSERT_EQ(code, 0) << json;
  EXPECT_NE(json.find("\"run_id\":\"run-7\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"round\":\"3\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"next_batch_index\":\"5\""), std::string::npos) << json;
}

TEST(CApiTest, InspectCheckpointRefusesOtherBytes) {
  const auto [code, message] = Inspect("PAR1 not a checkpoint at all, longer than a header");
  EXPECT_EQ(code, kInvalidArgument);
  EXPECT_NE(message.find("not a Zephon checkpoint"), std::string::npos) << message;
  EXPECT_NE(Inspect("").first, 0);
}

}  // namespace
