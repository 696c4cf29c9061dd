// ColumnChunkReader: the pages of one column chunk (one column of one row group),
// decoded one page at a time: definition and repetition levels, and the page's
// non-null values (strings as views, or integers), dictionary references resolved.
//
// Reads only the chunk's byte range [dictionary or first data page, + total compressed
// size) from the file, through ShardFile::View (no copy for resident files). Keeps the
// chunk's bytes, its dictionary and one decoded page. Page CRCs are checked when
// present. Every error names the file, row group, column and page, as
// "<file>: row group <g>, column '<c>', page <p>: <what>".
// Thread-compatible.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_COLUMN_CHUNK_READER_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_COLUMN_CHUNK_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/parquet/byte_buffer.h"
#include "daemon/pipeline/formats/parquet/metadata.h"
#include "daemon/pipeline/formats/parquet/schema.h"
#include "daemon/pipeline/formats/shard_file.h"

namespace zephon::pipeline::parquet {

// One decoded data page. Views stay valid until the next NextPage or destruction.
struct DecodedPage {
  size_t num_levels = 0;          // level entries (values incl. nulls)
  // Levels fit a byte: schemas nest at most 64 deep (schema.cc).
  PodVector<uint8_t> def;         // empty when max_def == 0 (all defined)
  PodVector<uint8_t> rep;         // empty when max_rep == 0
  std::vector<std::string_view> strings;  // BYTE_ARRAY non-null values
  PodVector<int64_t> ints;                // INT32/INT64 non-null values
};

// Buffers the chunk readers of one file reuse, one chunk at a time (so a file's pages
// are read and decompressed into memory that is already mapped).
struct ChunkBuffers {
  ByteBuffer chunk;         // the chunk's bytes, when the file is not resident
  ByteBuffer page;          // the current page, decompressed
  ByteBuffer dictionary;    // the chunk's dictionary page, decompressed
  std::string delta_arena;  // DELTA_BYTE_ARRAY's rebuilt strings
};

// The most level entries one page may hold: larger is refused. DuckDB writes one page per
// row group and column (~30M values for 122,880 rows of 2,048-token lists).
inline constexpr size_t kMaxPageValues = size_t{1} << 28;

class ColumnChunkReader {
 public:
  // Checks the chunk's metadata against the plan and the file (type, path, codec, byte
  // range within the file) and reads its bytes into buffers->chunk (or views them in a
  // resident file). `row_group` is the 0-based index. `buffers` must outlive the reader
  // and serve one reader at a time.
  static absl::StatusOr<std::unique_ptr<ColumnChunkReader>> Open(const ShardFile& file,
                                                                 const ColumnChunk& chunk,
                                                                 int row_group,
                                                                 const ColumnPlan& plan,
                                                                 ChunkBuffers* buffers);

  // Decodes the next data page into *page: true, or false after the chunk's last page.
  absl::StatusOr<bool> NextPage(DecodedPage* page);

  // 0-based index of the page NextPage returned last (dictionary pages count).
  int page_index() const { return page_index_; }
  // Prefix for messages about the current page.
  std::string Context() const;

 private:
  ColumnChunkReader(const ShardFile& file, int row_group, const ColumnPlan& plan,
                    const ColumnMetaData& meta, ChunkBuffers* buffers)
      : file_(file), row_group_(row_group), plan_(plan), meta_(meta), buffers_(*buffers) {}

  absl::Status Fail(absl::Status status) const;
  absl::Status ReadDictionary(const PageHeader& header, std::string_view data);
  absl::Status DecodeValues(Encoding encoding, std::string_view data, size_t count,
                            DecodedPage* page);
  absl::StatusOr<std::string_view> PageData(const PageHeader& header, std::string_view raw,
                                            size_t skip, ByteBuffer* buffer);

  const ShardFile& file_;
  const int row_group_;
  const ColumnPlan& plan_;
  const ColumnMetaData meta_;
  ChunkBuffers& buffers_;
  std::string_view chunk_;  // the chunk's bytes (into the file or buffers_.chunk)
  size_t pos_ = 0;          // next page header's offset within chunk_
  int page_index_ = -1;

  bool has_dictionary_ = false;
  std::vector<std::string_view> dict_strings_;
  PodVector<int64_t> dict_ints_;
  PodVector<uint32_t> indices_;
};

}  // namespace zephon::pipeline::parquet

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_PARQUET_COLUMN_CHUNK_READER_H_
