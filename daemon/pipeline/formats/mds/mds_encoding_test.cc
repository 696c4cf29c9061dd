#include "daemon/pipeline/formats/mds/mds_encoding.h"

#include <string>
#include <vector>

#include "daemon/pipeline/formats/mds/mds_test_util.h"
#include "gtest/gtest.h"

namespace zephon::pipeline::mds {
namespace {

using V = std::vector<int32_t>;

using testing::Has;

TEST(ParseMdsEncodingTest, StreamingNames) {
  EXPECT_EQ(ParseMdsEncoding("str")->kind, MdsEncoding::Kind::kStr);
  EXPECT_EQ(ParseMdsEncoding("bytes")->kind, MdsEncoding::Kind::kBytes);
  const auto i = ParseMdsEncoding("int");
  EXPECT_EQ(i->kind, MdsEncoding::Kind::kScalar);
  EXPECT_EQ(i->FixedSize(), 8u);
  EXPECT_EQ(ParseMdsEncoding("uint16")->FixedSize(), 2u);
  EXPECT_EQ(ParseMdsEncoding("float64")->FixedSize(), 8u);
  EXPECT_EQ(ParseMdsEncoding("pkl")->kind, MdsEncoding::Kind::kOther);
  EXPECT_EQ(ParseMdsEncoding("list[jpeg]")->kind, MdsEncoding::Kind::kOther);
  EXPECT_EQ(ParseMdsEncoding("str")->FixedSize(), std::nullopt);
}

TEST(ParseMdsEncodingTest, NdarrayForms) {
  const auto dynamic = ParseMdsEncoding("ndarray");
  EXPECT_EQ(dynamic->kind, MdsEncoding::Kind::kNdarray);
  EXPECT_FALSE(dynamic->dtype.has_value());
  EXPECT_EQ(dynamic->FixedSize(), std::nullopt);
  const auto typed = ParseMdsEncoding("ndarray:uint16");
  EXPECT_EQ(typed->dtype, MdsDtype::kUint16);
  EXPECT_EQ(typed->FixedSize(), std::nullopt);
  const auto fixed = ParseMdsEncoding("ndarray:int32:2,4");
  EXPECT_EQ(*fixed->shape, (std::vector<uint64_t>{2, 4}));
  EXPECT_EQ(fixed->FixedSize(), 32u);
}

TEST(ParseMdsEncodingTest, RefusesWhatStreamingDoesNotWrite) {
  EXPECT_EQ(ParseMdsEncoding("avro").status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_TRUE(Has(ParseMdsEncoding("avro").status().message(), "\"avro\""));
  EXPECT_EQ(ParseMdsEncoding("ndarray:int128").status().code(),
            absl::StatusCode::kUnimplemented);
  EXPECT_EQ(ParseMdsEncoding("ndarray:int32:0").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseMdsEncoding("ndarray:int32:2,x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ParseMdsEncoding("ndarray:int32:2:3").status().code(),
            absl::StatusCode::kInvalidArgument);
  // More than 4 GiB per value: no shard can hold it, and the size must not overflow.
  EXPECT_EQ(ParseMdsEncoding("ndarray:int64:4294967296,4294967296").status().code(),
            absl::StatusCode::kInvalidArgument);
}

std::string Bytes(std::initializer_list<int> v) {
  std::string s;
  for (int b : v) s.push_back(static_cast<char>(b));
  return s;
}

TEST(DecodeNdarrayTokensTest, DynamicDtypeAndShape) {
  std::vector<int32_t> out;
  // int32 (33), ndim 2 with uint8 dims (2 << 2 | 0): shape (1, 2), values 7, 300.
  const std::string v = Bytes({33, 8, 1, 2, 7, 0, 0, 0, 0x2c, 1, 0, 0});
  ASSERT_TRUE(DecodeNdarrayTokens(*ParseMdsEncoding("ndarray"), v, &out).ok());
  EXPECT_EQ(out, (V{7, 300}));
  // uint16 dims (k = 1): shape (3,) of uint8 (8).
  ASSERT_TRUE(DecodeNdarrayTokens(*ParseMdsEncoding("ndarray"), Bytes({8, 5, 3, 0, 1, 2, 255}),
                                  &out).ok());
  EXPECT_EQ(out, (V{1, 2, 255}));
}

TEST(DecodeNdarrayTokensTest, FixedDtypeAndShape) {
  std::vector<int32_t> out;
  const std::string v = Bytes({1, 0, 2, 0, 3, 0, 4, 0});
  ASSERT_TRUE(DecodeNdarrayTokens(*ParseMdsEncoding("ndarray:uint16:2,2"), v, &out).ok());
  EXPECT_EQ(out, (V{1, 2, 3, 4}));
  // ndarray:uint16 has the shape header but no dtype byte.
  ASSERT_TRUE(DecodeNdarrayTokens(*ParseMdsEncoding("ndarray:uint16"), Bytes({4, 1, 9, 0}),
                                  &out).ok());
  EXPECT_EQ(out, (V{9}));
}

TEST(DecodeNdarrayTokensTest, ZeroDimIsEmpty) {
  std::vector<int32_t> out = {1};
  ASSERT_TRUE(DecodeNdarrayTokens(*ParseMdsEncoding("ndarray:int32"), Bytes({4, 0}), &out).ok());
  EXPECT_TRUE(out.empty());
}

TEST(DecodeNdarrayTokensTest, RefusesFloatsNegativesAndTooLarge) {
  std::vector<int32_t> out;
  const MdsEncoding any = *ParseMdsEncoding("ndarray");
  EXPECT_EQ(DecodeNdarrayTokens(any, Bytes({34, 4, 1, 0, 0, 0x80, 0x3f}), &out).code(),
            absl::StatusCode::kInvalidArgument);
  const absl::Status neg = DecodeNdarrayTokens(any, Bytes({9, 4, 1, 0xff}), &out);
  EXPECT_EQ(neg.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(neg.message(), "token id -1 at element 0"));
  const absl::Status big =
      DecodeNdarrayTokens(any, Bytes({32, 4, 2, 1, 0, 0, 0, 0, 0, 0, 0x80}), &out);
  EXPECT_EQ(big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Has(big.message(), "2147483648 at element 1"));
}

TEST(DecodeNdarrayTokensTest, CorruptValuesAreDataLoss) {
  std::vector<int32_t> out;
  const MdsEncoding any = *ParseMdsEncoding("ndarray");
  EXPECT_EQ(DecodeNdarrayTokens(any, "", &out).code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(DecodeNdarrayTokens(any, Bytes({7, 4, 1, 0}), &out).code(),
            absl::StatusCode::kDataLoss);  // no dtype 7
  EXPECT_EQ(DecodeNdarrayTokens(any, Bytes({8}), &out).code(), absl::StatusCode::kDataLoss);
  // 3 dims of 8 bytes announced, 2 bytes there.
  EXPECT_EQ(DecodeNdarrayTokens(any, Bytes({8, 15, 1, 1}), &out).code(),
            absl::StatusCode::kDataLoss);
  // Shape 3 but 2 elements.
  EXPECT_EQ(DecodeNdarrayTokens(any, Bytes({8, 4, 3, 1, 2}), &out).code(),
            absl::StatusCode::kDataLoss);
  // Dims whose product overflows 64 bits: no overflow, no huge allocation.
  std::string huge = Bytes({8, (2 << 2) | 3});
  huge += std::string(16, '\xff');
  EXPECT_EQ(DecodeNdarrayTokens(any, huge, &out).code(), absl::StatusCode::kDataLoss);
  // Fixed shape whose bytes disagree.
  EXPECT_EQ(DecodeNdarrayTokens(*ParseMdsEncoding("ndarray:uint16:2"), Bytes({1, 0, 2}), &out)
                .code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace zephon::pipeline::mds
