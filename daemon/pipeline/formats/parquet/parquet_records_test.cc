// OpenParquetRecords over small files DuckDB wrote (testdata/, from
// tests/parquet/write_testdata.mjs), and over those files with bytes mutated: every bad
// file is a clear error naming what is wrong and where, never a crash.
#include "daemon/pipeline/formats/parquet/parquet_records.h"

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pipeline/formats/parquet/codecs.h"
#include "daemon/pipeline/formats/parquet/metadata.h"
#include "daemon/pipeline/formats/shard_file.h"
#include "gtest/gtest.h"

namespace zephon::pipeline {
namespace {

std::string Load(const std::string& name) {
  std::ifstream in("daemon/pipeline/formats/parquet/testdata/" + name, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Each record as "null", the text, or the ids joined by ','.
absl::StatusOr<std::vector<std::string>> ReadAll(const std::string& bytes,
                                                 const std::string& field,
                                                 RecordField::Kind kind,
                                                 std::string* where = nullptr) {
  auto source = OpenParquetRecords(MemoryShardFile("t.parquet", bytes), RecordField{kind, field});
  if (!source.ok()) return source.status();
  std::vector<std::string> out;
  RecordSource::Value v;
  while (true) {
    absl::StatusOr<bool> more = (*source)->Next(&v);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (where != nullptr) *where = (*source)->Where();
    switch (v.kind) {
      case RecordSource::Value::Kind::kNull: out.push_back("null"); break;
      case RecordSource::Value::Kind::kText: out.emplace_back(v.text); break;
      case RecordSource::Value::Kind::kTokens: {
        std::string s = "[";
        for (size_t i = 0; i < v.tokens.size(); ++i) absl::StrAppend(&s, i ? "," : "", v.tokens[i]);
        out.push_back(s + "]");
        break;
      }
    }
  }
  EXPECT_EQ(out.size(), *(*source)->NumRecords());
  return out;
}

absl::StatusOr<std::vector<std::string>> ReadText(const std::string& bytes) {
  return ReadAll(bytes, "text", RecordField::Kind::kText);
}

parquet::FileMetaData Footer(const std::string& bytes) {
  uint32_t len;
  std::memcpy(&len, bytes.data() + bytes.size() - 8, 4);
  return *parquet::ParseFileMetaData(std::string_view(bytes).substr(bytes.size() - 8 - len, len));
}

// Offset of the first data page header of the file's only column.
size_t DataPage(const std::string& bytes) {
  return Footer(bytes).row_groups[0].columns[0].meta->data_page_offset;
}

// Adds `delta` to the zigzag i32 whose one-byte varint follows `marker` at or after `from`.
void BumpVarintAfter(std::string* bytes, size_t from, std::string_view marker, int delta) {
  const size_t at = bytes->find(marker, from);
  ASSERT_NE(at, std::string::npos);
  char& b = (*bytes)[at + marker.size()];
  ASSERT_EQ(b & 0x80, 0) << "a one-byte varint";
  b = static_cast<char>(b + 2 * delta);
}

void ExpectError(const absl::StatusOr<std::vector<std::string>>& got, absl::StatusCode code,
                 std::initializer_list<std::string_view> parts) {
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), code) << got.status();
  for (std::string_view part : parts) {
    EXPECT_NE(std::string(got.status().message()).find(part), std::string::npos)
        << "'" << part << "' not in: " << got.status();
  }
}

TEST(ParquetRecordsTest, ReadsTextWithNulls) {
  std::string where;
  auto rows = ReadAll(Load("plain.parquet"), "text", RecordField::Kind::kText, &where);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 50u);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ((*rows)[i], i % 7 == 3 ? "null" : absl::StrCat("row ", i)) << i;
  }
  EXPECT_EQ(where, "t.parquet: row 49 (row group 0, page 0)");
}

TEST(ParquetRecordsTest, ReadsDictionaryEncodedText) {
  auto rows = ReadText(Load("dict.parquet"));
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ((*rows)[i], absl::StrCat("word ", i % 10));
}

TEST(ParquetRecordsTest, ReadsTokenListsWithEmptyAndNullLists) {
  auto rows = ReadAll(Load("tokens.parquet"), "ids", RecordField::Kind::kTokens);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_EQ(*rows, (std::vector<std::string>{"[0,0,0]", "[1,10,100]", "[2,20,200]", "null", "[]",
                                             "[5,50,500]", "[6,60,600]", "[7,70,700]"}));
}

TEST(ParquetRecordsTest, WrongKindAndMissingFieldsNameTheFix) {
  ExpectError(ReadAll(Load("plain.parquet"), "text", RecordField::Kind::kTokens),
              absl::StatusCode::kInvalidArgument,
              {"t.parquet", "field 'text' is a string column: use tokenize(field='text')"});
  ExpectError(ReadAll(Load("tokens.parquet"), "ids", RecordField::Kind::kText),
              absl::StatusCode::kInvalidArgument, {"field 'ids' is a list<int32> column"});
  ExpectError(ReadText(Load("tokens.parquet")), absl::StatusCode::kInvalidArgument,
              {"field 'text' is not a column", "its columns are: ids"});
}

TEST(ParquetRecordsTest, BadMagicTruncatedAndFooterPastTheFile) {
  std::string bytes = Load("plain.parquet");
  std::string bad = bytes;
  bad[0] = 'X';
  ExpectError(ReadText(bad), absl::StatusCode::kDataLoss, {"t.parquet", "not a Parquet file"});
  ExpectError(ReadText(bytes.substr(0, bytes.size() - 3)), absl::StatusCode::kDataLoss,
              {"not a Parquet file"});
  bad = bytes;
  const uint32_t huge = bytes.size();
  std::memcpy(bad.data() + bytes.size() - 8, &huge, 4);
  ExpectError(ReadText(bad), absl::StatusCode::kDataLoss, {"footer length", "passes the file"});
  ExpectError(ReadText("PAR1PAR1"), absl::StatusCode::kDataLoss, {"too short"});
}

TEST(ParquetRecordsTest, BadThriftVarintInTheFooter) {
  std::string bytes = Load("plain.parquet");
  uint32_t len;
  std::memcpy(&len, bytes.data() + bytes.size() - 8, 4);
  const size_t footer = bytes.size() - 8 - len;
  for (size_t i = 1; i < 12; ++i) bytes[footer + i] = '\xff';
  ExpectError(ReadText(bytes), absl::StatusCode::kDataLoss,
              {"t.parquet", "corrupt Parquet footer", "varint longer"});
}

TEST(ParquetRecordsTest, PageOfTheWrongSize) {
  std::string bytes = Load("plain.parquet");
  // PageHeader field 1 (type 0), then field 2 (uncompressed_page_size): bump the low
  // bits of its first varint byte (+1 byte).
  const size_t at = DataPage(bytes);
  ASSERT_EQ(bytes.substr(at, 3), std::string("\x15\x00\x15", 3));
  ASSERT_LT(bytes[at + 3] & 0x7f, 0x7e);
  bytes[at + 3] = static_cast<char>(bytes[at + 3] + 2);
  ExpectError(ReadText(bytes), absl::StatusCode::kDataLoss,
              {"t.parquet: row group 0, column 'text', page 0", "the page header says"});
}

TEST(ParquetRecordsTest, DictionaryIndexOutOfRange) {
  std::string bytes = Load("dict.parquet");
  const parquet::ColumnMetaData meta = *Footer(bytes).row_groups[0].columns[0].meta;
  ASSERT_TRUE(meta.dictionary_page_offset.has_value());
  // DictionaryPageHeader (field 7, after field 3: "\x4c") num_values (field 1: "\x15"): 10 -> 9.
  BumpVarintAfter(&bytes, *meta.dictionary_page_offset, std::string_view("\x4c\x15", 2), -1);
  ExpectError(ReadText(bytes), absl::StatusCode::kDataLoss,
              {"row group 0, column 'text', page 1", "dictionary index 9 out of range"});
}

TEST(ParquetRecordsTest, LevelsThatDisagreeWithTheRows) {
  std::string bytes = Load("plain.parquet");
  // DataPageHeader (field 5, after field 3: "\x2c") num_values (field 1): 50 -> 49.
  BumpVarintAfter(&bytes, DataPage(bytes), std::string_view("\x2c\x15", 2), -1);
  ExpectError(ReadText(bytes), absl::StatusCode::kDataLoss,
              {"row group 0, column 'text'", "levels disagree", "50 rows"});
}

TEST(ParquetRecordsTest, EveryTruncationAndByteFlipFailsCleanly) {
  // No crash and no out-of-bounds read (ASan) whatever the corruption: each mutated
  // file either reads or fails with a status.
  for (const char* name : {"plain.parquet", "dict.parquet", "tokens.parquet"}) {
    const std::string bytes = Load(name);
    for (size_t i = 0; i < bytes.size(); ++i) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(bad[i] ^ 0x5a);
      const RecordField::Kind kind = std::string(name) == "tokens.parquet"
                                         ? RecordField::Kind::kTokens
                                         : RecordField::Kind::kText;
      (void)ReadAll(bad, std::string(name) == "tokens.parquet" ? "ids" : "text", kind);
      (void)ReadAll(bytes.substr(0, i), "text", kind);
    }
  }
}

std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
  return out;
}

uint64_t Zigzag(int64_t v) { return (static_cast<uint64_t>(v) << 1) ^ (v < 0 ? ~uint64_t{0} : 0); }

// plain.parquet (DuckDB writes no page CRCs) with PageHeader.crc (field 4) = `crc` added to
// its one data page header, the column chunk's sizes in the footer grown to match.
std::string WithPageCrc(const std::string& bytes, uint32_t crc) {
  const parquet::FileMetaData footer = Footer(bytes);
  const parquet::ColumnMetaData& meta = *footer.row_groups[0].columns[0].meta;
  EXPECT_FALSE(meta.dictionary_page_offset.has_value());
  const size_t page = meta.data_page_offset;
  const auto header = parquet::ParsePageHeader(std::string_view(bytes).substr(page));
  EXPECT_TRUE(header.ok());
  // Fields 1-3, then field 5 (the DataPageHeader struct, delta 2: 0x2c).
  const size_t field5 = page + 2 + 1 + Varint(Zigzag(header->uncompressed_page_size)).size() +
                        1 + Varint(Zigzag(header->compressed_page_size)).size();
  EXPECT_EQ(bytes[field5], '\x2c');
  const std::string crc_field =
      "\x15" + Varint(Zigzag(static_cast<int32_t>(crc)));  // field 4, i32; then 5 is delta 1
  std::string out = bytes.substr(0, field5) + crc_field + "\x1c" + bytes.substr(field5 + 1);
  // The footer's total sizes (fields 6 and 7 of ColumnMetaData, both "\x16" + varint
  // for an uncompressed chunk) grow by the inserted bytes, in varints of the same length.
  const std::string old_size = "\x16" + Varint(Zigzag(meta.total_compressed_size));
  const std::string new_size =
      "\x16" + Varint(Zigzag(meta.total_compressed_size + crc_field.size()));
  EXPECT_EQ(old_size.size(), new_size.size());
  uint32_t len;
  std::memcpy(&len, out.data() + out.size() - 8, 4);
  int replaced = 0;
  for (size_t at = out.size() - 8 - len; (at = out.find(old_size, at)) != std::string::npos;) {
    out.replace(at, old_size.size(), new_size);
    ++replaced;
  }
  EXPECT_GE(replaced, 1);
  return out;
}

TEST(ParquetRecordsTest, PageCrcsAreChecked) {
  const std::string bytes = Load("plain.parquet");
  const parquet::ColumnMetaData meta = *Footer(bytes).row_groups[0].columns[0].meta;
  const auto header =
      parquet::ParsePageHeader(std::string_view(bytes).substr(meta.data_page_offset));
  ASSERT_TRUE(header.ok());
  const uint32_t crc = parquet::PageCrc32(std::string_view(bytes).substr(
      meta.data_page_offset + header->header_size, header->compressed_page_size));
  auto good = ReadText(WithPageCrc(bytes, crc));
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->size(), 50u);
  ExpectError(ReadText(WithPageCrc(bytes, crc ^ 0x10)), absl::StatusCode::kDataLoss,
              {"t.parquet: row group 0, column 'text', page 0", "page CRC mismatch"});
}

// A non-resident file (as local and s3:// files are) that records the ranges read.
class RecordingFile : public ShardFile {
 public:
  explicit RecordingFile(std::string bytes) : inner_(MemoryShardFile("t.parquet", bytes)) {}
  const std::string& path() const override { return inner_->path(); }
  uint64_t size() const override { return inner_->size(); }
  absl::Status ReadAt(uint64_t offset, uint64_t n, char* out) const override {
    absl::MutexLock lock(&mu_);
    reads_->emplace_back(offset, n);
    return inner_->ReadAt(offset, n, out);
  }
  std::shared_ptr<std::vector<std::pair<uint64_t, uint64_t>>> reads() const { return reads_; }

 private:
  std::unique_ptr<ShardFile> inner_;
  mutable absl::Mutex mu_;
  std::shared_ptr<std::vector<std::pair<uint64_t, uint64_t>>> reads_ ABSL_PT_GUARDED_BY(mu_) =
      std::make_shared<std::vector<std::pair<uint64_t, uint64_t>>>();
};

TEST(ParquetRecordsTest, ReadsOnlyTheFooterAndTheSelectedColumnsChunks) {
  const std::string bytes = Load("two_columns.parquet");
  const parquet::FileMetaData footer = Footer(bytes);
  const parquet::ColumnMetaData& other = *footer.row_groups[0].columns[1].meta;
  ASSERT_EQ(other.path, std::vector<std::string>{"other"});
  const uint64_t other_begin = other.dictionary_page_offset.value_or(other.data_page_offset);
  const uint64_t other_end = other.data_page_offset + other.total_compressed_size;

  auto file = std::make_unique<RecordingFile>(bytes);
  auto reads = file->reads();
  auto source = OpenParquetRecords(std::move(file), RecordField{RecordField::Kind::kText, "text"});
  ASSERT_TRUE(source.ok()) << source.status();
  RecordSource::Value v;
  int n = 0;
  while (*(*source)->Next(&v)) {
    EXPECT_EQ(v.text, absl::StrCat("row ", n));
    ++n;
  }
  EXPECT_EQ(n, 30);
  uint64_t total = 0;
  for (const auto& [offset, len] : *reads) {
    EXPECT_TRUE(offset + len <= other_begin || offset >= other_end)
        << "read [" << offset << ", +" << len << ") overlaps column 'other' [" << other_begin
        << ", " << other_end << ")";
    total += len;
  }
  EXPECT_LT(total, bytes.size() - (other_end - other_begin) + 1);
}

TEST(ParquetRecordsTest, ReadsManyPagesAndTheOffsetIndexArrowWrites) {
  const std::string bytes = Load("arrow_pages.parquet");
  std::string where;
  auto rows = ReadAll(bytes, "text", RecordField::Kind::kText, &where);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 30u);
  for (int i = 0; i < 30; ++i) EXPECT_EQ((*rows)[i], absl::StrCat("row ", i));

  const parquet::FileMetaData footer = Footer(bytes);
  const parquet::ColumnChunk& chunk = footer.row_groups[0].columns[0];
  ASSERT_TRUE(chunk.offset_index_offset.has_value());
  ASSERT_TRUE(chunk.offset_index_length.has_value());
  ASSERT_LE(*chunk.offset_index_offset + *chunk.offset_index_length, bytes.size());
  const auto index = parquet::ParseOffsetIndex(
      std::string_view(bytes).substr(*chunk.offset_index_offset, *chunk.offset_index_length));
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_GT(index->page_locations.size(), 2u);
  EXPECT_EQ(index->page_locations[0].offset, chunk.meta->data_page_offset);
  EXPECT_EQ(index->page_locations[0].first_row_index, 0);
  for (size_t p = 1; p < index->page_locations.size(); ++p) {
    const parquet::PageLocation& prev = index->page_locations[p - 1];
    EXPECT_EQ(index->page_locations[p].offset, prev.offset + prev.compressed_page_size);
    EXPECT_GT(index->page_locations[p].first_row_index, prev.first_row_index);
  }
  // Where() names the last page, which the index says holds the last row.
  EXPECT_EQ(where, absl::StrCat("t.parquet: row 29 (row group 0, page ",
                                index->page_locations.size() - 1, ")"));
}

TEST(ParquetRecordsTest, FooterChecksumFollowsTheFooter) {
  const std::string bytes = Load("plain.parquet");
  auto a = ParquetFooterChecksum(*MemoryShardFile("a", bytes));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(*a, *ParquetFooterChecksum(*MemoryShardFile("b", bytes)));
  std::string changed = bytes;
  changed[bytes.size() - 12] ^= 1;  // a footer byte
  EXPECT_NE(*a, *ParquetFooterChecksum(*MemoryShardFile("c", changed)));
  EXPECT_NE(*a, *ParquetFooterChecksum(*MemoryShardFile("d", Load("dict.parquet"))));
}

}  // namespace
}  // namespace zephon::pipeline
