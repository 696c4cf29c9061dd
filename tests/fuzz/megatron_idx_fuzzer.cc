// Fuzz target: the Megatron .idx parser (daemon/pipeline/formats/megatron_reader.cc), which
// reads dataset index files anyone who can write a dataset directory controls.
//
// Input: [u32 little-endian .bin size, taken modulo 64 KiB][.idx bytes]. The .bin is an
// in-memory file of that size filled with a fixed pattern (its contents do not affect
// validation). Invariants beyond "no crash, no UB":
//   * Open fails with DATA_LOSS naming the .idx file, or
//   * it succeeds and keeps its promise that every sequence lies inside the .bin:
//     CopyTokens of every sample (up to 4096 of them, whole length) succeeds, and the
//     sample lengths sum to no more tokens than the .bin holds.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/megatron_reader.h"
#include "daemon/pipeline/formats/shard_file.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

constexpr uint32_t kMaxBinBytes = 1u << 16;
constexpr uint64_t kMaxSamplesChecked = 4096;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using zephon::pipeline::MegatronShard;
  using zephon::pipeline::MemoryShardFile;
  if (size < 4) return 0;
  uint32_t bin_bytes;
  std::memcpy(&bin_bytes, data, 4);
  bin_bytes %= kMaxBinBytes;
  static const std::string* const pattern = [] {
    auto* p = new std::string(kMaxBinBytes, '\0');
    for (uint32_t i = 0; i < kMaxBinBytes; ++i) (*p)[i] = static_cast<char>(i * 131 + 7);
    return p;
  }();
  std::string bin = pattern->substr(0, bin_bytes);
  std::string idx(reinterpret_cast<const char*>(data) + 4, size - 4);

  absl::StatusOr<std::unique_ptr<MegatronShard>> shard = MegatronShard::Open(
      MemoryShardFile("fuzz.idx", std::move(idx)), MemoryShardFile("fuzz.bin", bin));
  if (!shard.ok()) {
    FUZZ_CHECK(shard.status().code() == absl::StatusCode::kDataLoss,
               shard.status().ToString());
    FUZZ_CHECK(shard.status().message().find("fuzz.idx") != std::string_view::npos,
               "error does not name the .idx file: " + shard.status().ToString());
    return 0;
  }
  const uint64_t samples = (*shard)->NumSamples();
  std::vector<int32_t> tokens;
  for (uint64_t i = 0; i < samples && i < kMaxSamplesChecked; ++i) {
    const uint64_t length = (*shard)->SampleLength(i);
    FUZZ_CHECK(length <= bin_bytes, "sample " + std::to_string(i) + " longer than the .bin");
    tokens.resize(length);
    const absl::Status s = (*shard)->CopyTokens(i, 0, length, tokens.data());
    FUZZ_CHECK(s.ok(), "sample " + std::to_string(i) + ": " + s.ToString());
  }
  return 0;
}
