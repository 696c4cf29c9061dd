#include "daemon/pipeline/formats/tokens.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "daemon/pipeline/formats/shard_file.h"

namespace zephon::pipeline {
namespace {

// Little-endian uint16 tokens after `lead` bytes of padding (odd offsets: unaligned).
std::string Uint16Bytes(const std::vector<uint16_t>& tokens, size_t lead = 1) {
  std::string bytes(lead, '\x7f');
  for (uint16_t t : tokens) {
    bytes.push_back(static_cast<char>(t & 0xff));
    bytes.push_back(static_cast<char>(t >> 8));
  }
  return bytes;
}

// A file whose bytes come only through ReadAt (data() is nullptr), like an object-store
// file; counts reads and can be made to fail.
class RemoteFake final : public ShardFile {
 public:
  explicit RemoteFake(std::string bytes) : bytes_(std::move(bytes)) {}
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return bytes_.size(); }
  absl::Status ReadAt(uint64_t offset, uint64_t n, char* out) const override {
    ++reads;
    last_n = n;
    if (!fail.ok()) return fail;
    if (offset > bytes_.size() || n > bytes_.size() - offset) {
      return absl::OutOfRangeError("past the end of " + path_);
    }
    bytes_.copy(out, n, offset);
    return absl::OkStatus();
  }
  mutable int reads = 0;
  mutable uint64_t last_n = 0;
  absl::Status fail;

 private:
  const std::string path_ = "s3://bucket/remote.bin";
  const std::string bytes_;
};

// A resident file whose ReadAt must never be called (decoding is in place).
class ResidentNoRead final : public ShardFile {
 public:
  explicit ResidentNoRead(std::string bytes) : bytes_(std::move(bytes)) {}
  const std::string& path() const override { return path_; }
  uint64_t size() const override { return bytes_.size(); }
  const char* data() const override { return bytes_.data(); }
  absl::Status ReadAt(uint64_t, uint64_t, char*) const override {
    ADD_FAILURE() << "resident files are decoded in place, not copied";
    return absl::InternalError("ReadAt on a resident file");
  }

 private:
  const std::string path_ = "/local/resident.bin";
  const std::string bytes_;
};

TEST(DecodeTokensAt, ResidentFilesDecodeInPlaceWithoutReads) {
  ResidentNoRead file(Uint16Bytes({1, 2, 65535, 4}));
  std::vector<int32_t> out(3);
  ASSERT_TRUE(DecodeTokensAt(file, 3, TokenType::kUint16, 3, out.data()).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{2, 65535, 4}));
  // MemoryShardFile is resident too.
  auto mem = MemoryShardFile("mem", Uint16Bytes({7, 8}, 0));
  ASSERT_TRUE(DecodeTokensAt(*mem, 0, TokenType::kUint16, 2, out.data()).ok());
  EXPECT_EQ(out[0], 7);
  EXPECT_EQ(out[1], 8);
}

TEST(DecodeTokensAt, RemoteFilesReadExactlyTheRangeOnce) {
  RemoteFake file(Uint16Bytes({10, 20, 30, 40, 50}));
  std::vector<int32_t> out(2);
  ASSERT_TRUE(DecodeTokensAt(file, 5, TokenType::kUint16, 2, out.data()).ok());
  EXPECT_EQ(out, (std::vector<int32_t>{30, 40}));
  EXPECT_EQ(file.reads, 1);
  EXPECT_EQ(file.last_n, 4u);
}

TEST(DecodeTokensAt, HugeRemoteSamplesThenSmallOnesDecodeCorrectly) {
  // > 4 MiB of uint32 tokens: the scratch buffer grows past its keep limit and is
  // released; the next (small) read must still land in a valid buffer.
  std::string bytes;
  const uint64_t n = (uint64_t{5} << 20) / 4;
  for (uint64_t i = 0; i < n; ++i) {
    const uint32_t v = static_cast<uint32_t>(i * 7);
    bytes.append(reinterpret_cast<const char*>(&v), 4);  // little-endian host
  }
  RemoteFake file(bytes);
  std::vector<int32_t> big(n);
  ASSERT_TRUE(DecodeTokensAt(file, 0, TokenType::kUint32, n, big.data()).ok());
  EXPECT_EQ(big[n - 1], static_cast<int32_t>((n - 1) * 7));
  int32_t one = -1;
  ASSERT_TRUE(DecodeTokensAt(file, 4 * 3, TokenType::kUint32, 1, &one).ok());
  EXPECT_EQ(one, 21);
}

TEST(DecodeTokensAt, ErrorsNameTheFile) {
  RemoteFake remote(Uint16Bytes({1, 2}));
  remote.fail = absl::UnavailableError("GET s3://bucket/remote.bin: HTTP 503");
  int32_t out[2];
  const absl::Status failed = DecodeTokensAt(remote, 1, TokenType::kUint16, 2, out);
  EXPECT_EQ(failed.code(), absl::StatusCode::kUnavailable) << failed;
  EXPECT_TRUE(absl::StrContains(failed.message(), "s3://bucket/remote.bin")) << failed;

  // A resident range past the end is an error, not a read past the mapping.
  auto mem = MemoryShardFile("/data/short.bin", Uint16Bytes({1, 2}, 0));
  const absl::Status past = DecodeTokensAt(*mem, 2, TokenType::kUint16, 2, out);
  EXPECT_EQ(past.code(), absl::StatusCode::kOutOfRange) << past;
  EXPECT_TRUE(absl::StrContains(past.message(), "/data/short.bin")) << past;
}

TEST(DecodeTokensAt, AbsurdRangesFailBeforeAnyBufferIsSized) {
  RemoteFake remote(Uint16Bytes({1, 2, 3}));
  int32_t out[1];
  // Would ask for ~2^63 bytes of scratch if the range were not checked first.
  const absl::Status huge =
      DecodeTokensAt(remote, 0, TokenType::kUint16, (uint64_t{1} << 62), out);
  EXPECT_EQ(huge.code(), absl::StatusCode::kOutOfRange) << huge;
  EXPECT_EQ(remote.reads, 0);
  const absl::Status overflow = DecodeTokensAt(remote, 0, TokenType::kUint32, UINT64_MAX / 2, out);
  EXPECT_EQ(overflow.code(), absl::StatusCode::kOutOfRange) << overflow;
  EXPECT_TRUE(absl::StrContains(overflow.message(), "s3://bucket/remote.bin")) << overflow;
}

}  // namespace
}  // namespace zephon::pipeline
