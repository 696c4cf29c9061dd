#include "daemon/pipeline/formats/parquet/encodings.h"

#include <lz4.h>
#include <zstd.h>

#include <string>
#include <vector>

#include "daemon/pipeline/formats/parquet/codecs.h"
#include "gtest/gtest.h"

namespace zephon::pipeline::parquet {
namespace {

template <size_t N>
std::string Bytes(const char (&s)[N]) {
  return std::string(s, N - 1);
}

TEST(RleHybridTest, DecodesBitPackedAndRleRuns) {
  // Encodings.md's example: 0..7 bit-packed at width 3 (one group), then an RLE run of
  // four 5s.
  const std::string data = Bytes("\x03\x88\xc6\xfa" "\x08\x05");
  std::vector<uint32_t> out(12);
  ASSERT_TRUE(DecodeRleHybrid(data, 3, 12, out.data()).ok());
  EXPECT_EQ(out, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 5, 5, 5, 5}));
}

TEST(RleHybridTest, DataEndingEarlyIsDataLoss) {
  std::vector<uint32_t> out(16);
  const absl::Status s = DecodeRleHybrid(Bytes("\x05\x88\xc6\xfa"), 3, 16, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeRleHybrid(Bytes("\x08\x05"), 3, 5, out.data()).code(),
            absl::StatusCode::kDataLoss);  // the run holds 4
}

TEST(DeltaBinaryPackedTest, DecodesConstantDeltas) {
  // block 128, 4 miniblocks, 5 values, first 1; min delta 1, all widths 0: 1..5.
  const std::string data = Bytes("\x80\x01\x04\x05\x02" "\x02\x00\x00\x00\x00");
  PodVector<int64_t> out;
  size_t consumed = 0;
  ASSERT_TRUE(DecodeDeltaBinaryPacked(data, 8, 5, &out, &consumed).ok());
  EXPECT_EQ(std::vector<int64_t>(out.begin(), out.end()), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_EQ(consumed, data.size());
}

TEST(DeltaBinaryPackedTest, MoreValuesThanThePageHoldsIsDataLoss) {
  const std::string data = Bytes("\x80\x01\x04\xff\xff\xff\x0f\x02");
  PodVector<int64_t> out;
  size_t consumed = 0;
  const absl::Status s = DecodeDeltaBinaryPacked(data, 8, 100, &out, &consumed);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE(out.empty());
}

TEST(PlainTest, StringLengthPastThePageIsDataLoss) {
  std::vector<std::string_view> out;
  EXPECT_TRUE(DecodePlainByteArray(Bytes("\x02\x00\x00\x00hi"), 1, &out).ok());
  EXPECT_EQ(out[0], "hi");
  const absl::Status s = DecodePlainByteArray(Bytes("\x09\x00\x00\x00hi"), 1, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("passes the page's end"), std::string::npos) << s;
}

TEST(CodecsTest, WrongDecompressedSizeIsDataLossAndLzoUnimplemented) {
  const std::string text(1000, 'z');
  std::string packed(ZSTD_compressBound(text.size()), '\0');
  packed.resize(ZSTD_compress(packed.data(), packed.size(), text.data(), text.size(), 3));
  std::string out(1001, '\0');
  ASSERT_TRUE(Decompress(Codec::kZstd, packed, 1000, out.data()).ok());
  EXPECT_EQ(out.substr(0, 1000), text);
  const absl::Status small = Decompress(Codec::kZstd, packed, 999, out.data());
  EXPECT_EQ(small.code(), absl::StatusCode::kDataLoss) << small;
  const absl::Status large = Decompress(Codec::kZstd, packed, 1001, out.data());
  EXPECT_EQ(large.code(), absl::StatusCode::kDataLoss) << large;
  EXPECT_NE(large.message().find("page header says 1001"), std::string::npos) << large;
  const absl::Status lzo = Decompress(Codec::kLzo, packed, 1000, out.data());
  EXPECT_EQ(lzo.code(), absl::StatusCode::kUnimplemented);
  EXPECT_NE(lzo.message().find("LZO"), std::string::npos);
}

std::string Lz4Block(std::string_view text) {
  std::string packed(LZ4_compressBound(static_cast<int>(text.size())), '\0');
  packed.resize(LZ4_compress_default(text.data(), packed.data(), static_cast<int>(text.size()),
                                     static_cast<int>(packed.size())));
  return packed;
}

// A Hadoop LZ4 frame: big-endian u32 decompressed size, u32 compressed size, the block.
std::string HadoopFrame(std::string_view text, uint32_t claimed_compressed = 0) {
  const std::string block = Lz4Block(text);
  const uint32_t sizes[2] = {static_cast<uint32_t>(text.size()),
                             claimed_compressed ? claimed_compressed
                                                : static_cast<uint32_t>(block.size())};
  std::string out;
  for (uint32_t v : sizes) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
  }
  return out + block;
}

TEST(CodecsTest, Lz4ReadsHadoopFramesAndRawBlocks) {
  const std::string a(700, 'a'), b = "then something else " + std::string(300, 'b');
  std::string out(a.size() + b.size(), '\0');
  const std::string framed = HadoopFrame(a) + HadoopFrame(b);
  ASSERT_TRUE(Decompress(Codec::kLz4, framed, out.size(), out.data()).ok());
  EXPECT_EQ(out, a + b);
  out.assign(out.size(), '\0');
  ASSERT_TRUE(Decompress(Codec::kLz4, Lz4Block(a + b), out.size(), out.data()).ok());
  EXPECT_EQ(out, a + b);
  out.assign(out.size(), '\0');
  const std::string empty;
  EXPECT_TRUE(Decompress(Codec::kLz4, empty, 0, out.data()).ok());
}

TEST(CodecsTest, Lz4LengthsPastThePageAreDataLossNeverOverruns) {
  const std::string text(1000, 'z');
  // The output buffer is exactly the page header's size: a guard byte after it must
  // survive every attempt.
  std::string out(text.size() + 1, '#');
  const std::string past_input = HadoopFrame(text, 1u << 30);
  absl::Status s = Decompress(Codec::kLz4, past_input, text.size(), out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("LZ4"), std::string::npos) << s;
  // A frame claiming more than the page header's size, and a raw block that is larger.
  s = Decompress(Codec::kLz4, HadoopFrame(text), text.size() - 1, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  s = Decompress(Codec::kLz4, Lz4Block(text), text.size() - 1, out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  // A raw block smaller than the header says: the size mismatch is named.
  s = Decompress(Codec::kLz4, Lz4Block(text.substr(0, 900)), text.size(), out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("page header says 1000"), std::string::npos) << s;
  EXPECT_EQ(out.back(), '#');
  // Truncated framing (a header cut short) is not Hadoop and not a valid raw block.
  s = Decompress(Codec::kLz4, HadoopFrame(text).substr(0, 6), text.size(), out.data());
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
}

TEST(CodecsTest, PageCrcIsZlibCrc32) {
  EXPECT_EQ(PageCrc32("123456789"), 0xCBF43926u);  // the CRC-32 check value
}

}  // namespace
}  // namespace zephon::pipeline::parquet
