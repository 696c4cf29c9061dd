// Parquet metadata: the parts of FileMetaData, RowGroup, ColumnChunk, ColumnMetaData,
// PageHeader and OffsetIndex this reader uses, decoded from Thrift compact bytes
// (field ids from apache/parquet-format's parquet.thrift). Unknown and unused fields
// are skipped; a required field that is missing is DATA_LOSS naming it.
// Plain values; the parse functions are thread-safe (no shared state).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_METADATA_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_METADATA_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace zephon::pipeline::parquet {

// parquet.thrift's enums, by their wire values.
enum class PhysicalType : int32_t {
  kBoolean = 0, kInt32 = 1, kInt64 = 2, kInt96 = 3, kFloat = 4, kDouble = 5,
  kByteArray = 6, kFixedLenByteArray = 7,
};
enum class Repetition : int32_t { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum class Codec : int32_t {
  kUncompressed = 0, kSnappy = 1, kGzip = 2, kLzo = 3, kBrotli = 4, kLz4 = 5, kZstd = 6,
  kLz4Raw = 7,
};
enum class Encoding : int32_t {
  kPlain = 0, kPlainDictionary = 2, kRle = 3, kBitPacked = 4, kDeltaBinaryPacked = 5,
  kDeltaLengthByteArray = 6, kDeltaByteArray = 7, kRleDictionary = 8, kByteStreamSplit = 9,
};
enum class PageType : int32_t { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };

// ConvertedType LIST (for the legacy list forms) and MAP.
inline constexpr int32_t kConvertedMap = 1;
inline constexpr int32_t kConvertedMapKeyValue = 2;
inline constexpr int32_t kConvertedList = 3;
// ConvertedType UINT_8 .. UINT_64: unsigned integers stored in INT32/INT64.
inline constexpr int32_t kConvertedUint8 = 11;
inline constexpr int32_t kConvertedUint64 = 14;

struct SchemaElement {
  std::optional<PhysicalType> type;  // leaves only
  int32_t type_length = 0;
  Repetition repetition = Repetition::kRequired;
  std::string name;
  int32_t num_children = 0;
  std::optional<int32_t> converted_type;
  bool logical_list = false;  // LogicalType LIST
  bool logical_map = false;   // LogicalType MAP
};

struct ColumnMetaData {
  PhysicalType type = PhysicalType::kBoolean;
  std::vector<std::string> path;
  Codec codec = Codec::kUncompressed;
  int64_t num_values = 0;
  int64_t total_compressed_size = 0;
  int64_t data_page_offset = 0;
  std::optional<int64_t> dictionary_page_offset;
};

struct ColumnChunk {
  std::optional<std::string> file_path;  // set: the chunk lives in another file
  std::optional<ColumnMetaData> meta;
  std::optional<int64_t> offset_index_offset;
  std::optional<int32_t> offset_index_length;
};

struct RowGroup {
  std::vector<ColumnChunk> columns;
  int64_t num_rows = 0;
};

struct FileMetaData {
  std::vector<SchemaElement> schema;  // depth-first, the root first
  int64_t num_rows = 0;
  std::vector<RowGroup> row_groups;
};

struct DataPageHeader {
  int32_t num_values = 0;
  Encoding encoding = Encoding::kPlain;
  Encoding definition_level_encoding = Encoding::kRle;
  Encoding repetition_level_encoding = Encoding::kRle;
};

struct DataPageHeaderV2 {
  int32_t num_values = 0;
  int32_t num_nulls = 0;
  int32_t num_rows = 0;
  Encoding encoding = Encoding::kPlain;
  int32_t definition_levels_byte_length = 0;
  int32_t repetition_levels_byte_length = 0;
  bool is_compressed = true;
};

struct DictionaryPageHeader {
  int32_t num_values = 0;
  Encoding encoding = Encoding::kPlain;
};

struct PageHeader {
  PageType type = PageType::kDataPage;
  int32_t uncompressed_page_size = 0;
  int32_t compressed_page_size = 0;
  std::optional<uint32_t> crc;
  std::optional<DataPageHeader> data_page;
  std::optional<DataPageHeaderV2> data_page_v2;
  std::optional<DictionaryPageHeader> dictionary_page;
  size_t header_size = 0;  // bytes of Thrift before the page's data
};

struct PageLocation {
  int64_t offset = 0;
  int32_t compressed_page_size = 0;
  int64_t first_row_index = 0;
};

struct OffsetIndex {
  std::vector<PageLocation> page_locations;
};

// Each fails with DATA_LOSS describing the corrupt or missing field.
absl::StatusOr<FileMetaData> ParseFileMetaData(std::string_view bytes);
// Parses the header at the start of `bytes` (which may continue with the page data).
absl::StatusOr<PageHeader> ParsePageHeader(std::string_view bytes);
absl::StatusOr<OffsetIndex> ParseOffsetIndex(std::string_view bytes);

const char* CodecName(Codec codec);
const char* EncodingName(Encoding encoding);
const char* PhysicalTypeName(PhysicalType type);

}  // namespace zephon::pipeline::parquet

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_METADATA_H_
