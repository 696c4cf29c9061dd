#include "shm/ring_layout.h"

#include <cstring>

#include "gtest/gtest.h"

namespace zephon::shm {
namespace {

TEST(RingLayoutTest, MagicSpellsZephringInMemory) {
  char bytes[8];
  std::memcpy(bytes, &kRingMagic, sizeof(bytes));
  EXPECT_EQ(std::string(bytes, 8), "ZEPHRING");
}

TEST(RingLayoutTest, DTypeSizesAndNames) {
  EXPECT_EQ(DTypeSize(DType::kUInt8), 1u);
  EXPECT_EQ(DTypeSize(DType::kInt16), 2u);
  EXPECT_EQ(DTypeSize(DType::kFloat32), 4u);
  EXPECT_EQ(DTypeSize(DType::kInt64), 8u);
  EXPECT_EQ(DTypeSize(DType::kFloat64), 8u);
  EXPECT_EQ(DTypeName(DType::kInt32), "int32");
  EXPECT_EQ(DTypeName(DType::kFloat64), "float64");
  EXPECT_EQ(static_cast<int>(DType::kUInt8), 1);
  EXPECT_EQ(static_cast<int>(DType::kFloat64), 10);
}

TEST(RingLayoutTest, UnknownDTypeHasNoSize) {
  EXPECT_EQ(DTypeSize(static_cast<DType>(0)), 0u);
  EXPECT_EQ(DTypeSize(static_cast<DType>(11)), 0u);
  EXPECT_EQ(DTypeName(static_cast<DType>(200)), "invalid");
}

TEST(RingLayoutTest, CursorMagicSpellsZephcursInMemory) {
  char bytes[8];
  std::memcpy(bytes, &kCursorMagic, sizeof(bytes));
  EXPECT_EQ(std::string(bytes, 8), "ZEPHCURS");
}

TEST(RingLayoutTest, SectionsArePageAlignedAndOrdered) {
  constexpr RingSections s = ComputeSections(8, 5, 10000);
  // Cursor segment: its header page, then the reader table.
  static_assert(s.reader_table_offset == kCursorHeaderBytes);
  EXPECT_EQ(s.cursor_bytes % kPageBytes, 0u);
  EXPECT_GE(s.cursor_bytes, s.reader_table_offset + 5 * kReaderRecordBytes);
  // Data segment: header page, descriptors, payload.
  static_assert(s.descriptor_offset == kHeaderBytes);
  EXPECT_EQ(s.payload_offset % kPageBytes, 0u);
  EXPECT_GE(s.payload_offset, s.descriptor_offset + 8 * kDescriptorBytes);
  EXPECT_EQ(s.slot_stride, 3 * kPageBytes);  // 512-byte table + 10000 bytes
  EXPECT_EQ(s.total_bytes, s.payload_offset + 8 * s.slot_stride);
}

}  // namespace
}  // namespace zephon::shm
