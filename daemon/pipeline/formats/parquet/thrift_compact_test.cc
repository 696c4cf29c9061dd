#include "daemon/pipeline/formats/parquet/thrift_compact.h"

#include <string>

#include "daemon/pipeline/formats/parquet/metadata.h"
#include "gtest/gtest.h"

namespace zephon::pipeline::parquet {
namespace {

// A string literal's bytes, embedded NULs included.
template <size_t N>
std::string Bytes(const char (&s)[N]) {
  return std::string(s, N - 1);
}

TEST(ThriftCompactTest, ReadsFieldsWithDeltasLongIdsAndSkipsUnknownOnes) {
  // struct { 1: i32 = -3 (zigzag 5); 3: binary "ab"; 100 (long-form id): struct
  //          { 1: i64 = 300 }; 101 (delta 1): bool true }
  const std::string bytes = Bytes(
      "\x15\x05"
      "\x28\x02" "ab"
      "\x0c\xc8\x01" "\x16\xd8\x04" "\x00"
      "\x11");
  ThriftCompactReader r(bytes);
  ASSERT_TRUE(r.BeginStruct().ok());
  int16_t id;
  ThriftType type;
  ASSERT_TRUE(*r.ReadFieldHeader(&id, &type));
  EXPECT_EQ(id, 1);
  EXPECT_EQ(*r.ReadI32(), -3);
  ASSERT_TRUE(*r.ReadFieldHeader(&id, &type));
  EXPECT_EQ(id, 3);
  EXPECT_EQ(std::string(*r.ReadBinary()), "ab");
  ASSERT_TRUE(*r.ReadFieldHeader(&id, &type));
  EXPECT_EQ(id, 100);
  EXPECT_EQ(type, ThriftType::kStruct);
  ASSERT_TRUE(r.Skip(type).ok());
  ASSERT_TRUE(*r.ReadFieldHeader(&id, &type));
  EXPECT_EQ(id, 101);
  EXPECT_TRUE(ThriftCompactReader::FieldBool(type));
}

TEST(ThriftCompactTest, RefusesOverlongVarints) {
  const std::string bytes = std::string("\x15") + std::string(12, '\xff');
  ThriftCompactReader r(bytes);
  ASSERT_TRUE(r.BeginStruct().ok());
  int16_t id;
  ThriftType type;
  ASSERT_TRUE(*r.ReadFieldHeader(&id, &type));
  const auto v = r.ReadI32();
  ASSERT_FALSE(v.ok());
  EXPECT_EQ(v.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(v.status().message().find("varint longer than 5 bytes"), std::string::npos);
}

TEST(ThriftCompactTest, RefusesLengthsPastTheData) {
  const std::string short_binary = Bytes("\x7f" "abc");
  ThriftCompactReader binary(short_binary);
  EXPECT_EQ(binary.ReadBinary().status().code(), absl::StatusCode::kDataLoss);
  // A list claiming 2^31 structs in 3 bytes never becomes a reservation.
  const std::string huge_list = Bytes("\xfc\x80\x80\x80\x80\x08");
  ThriftCompactReader list(huge_list);
  ThriftType element;
  uint32_t size;
  const absl::Status s = list.ReadListHeader(&element, &size);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("passes the"), std::string::npos) << s;
}

TEST(ThriftCompactTest, RefusesDeepNesting) {
  // 40 nested structs: field 1 of type struct, each.
  std::string bytes;
  for (int i = 0; i < 40; ++i) bytes += '\x1c';
  bytes += std::string(41, '\0');
  ThriftCompactReader r(bytes);
  const absl::Status s = r.Skip(ThriftType::kStruct);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("nest deeper"), std::string::npos) << s;
}

TEST(MetadataTest, PageHeaderMissingRequiredFieldsIsDataLoss) {
  // struct { 1: i32 type = 0 } only: no compressed_page_size.
  const auto h = ParsePageHeader(std::string("\x15\x00\x00", 3));
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("compressed_page_size"), std::string::npos);
}

TEST(MetadataTest, ParsesADataPageV2Header) {
  // type 3, uncompressed 100, compressed 80, crc 7, v2 header {num_values 10, num_nulls 1,
  // num_rows 10, encoding 0, def 2, rep 0, is_compressed false}.
  const std::string bytes = Bytes(
      "\x15\x06" "\x15\xc8\x01" "\x15\xa0\x01" "\x15\x0e"
      "\x4c" "\x15\x14" "\x15\x02" "\x15\x14" "\x15\x00" "\x15\x04" "\x15\x00" "\x12" "\x00"
      "\x00");
  const auto h = ParsePageHeader(bytes);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->type, PageType::kDataPageV2);
  EXPECT_EQ(h->uncompressed_page_size, 100);
  EXPECT_EQ(h->compressed_page_size, 80);
  EXPECT_EQ(*h->crc, 7u);
  ASSERT_TRUE(h->data_page_v2.has_value());
  EXPECT_EQ(h->data_page_v2->num_values, 10);
  EXPECT_EQ(h->data_page_v2->definition_levels_byte_length, 2);
  EXPECT_FALSE(h->data_page_v2->is_compressed);
  EXPECT_EQ(h->header_size, bytes.size());
}

}  // namespace
}  // namespace zephon::pipeline::parquet
