// LineReader: the lines of a plain, gzip or zstd text file, decompressed while streaming.
//
// Compression is chosen by file name: "*.gz" is gzip (zlib inflate; concatenated
// members are read in sequence), "*.zst" is zstd (ZSTD_decompressStream; concatenated
// frames likewise), anything else is plain text. Lines end at '\n' (a '\r' before it
// is kept in the line); a last line without '\n' is still a line. Byte offsets are in
// the decompressed text. Errors (DATA_LOSS) name the file, the line being read and the
// decompressed byte offset: corrupt data, and a stream that ends inside a gzip member
// or zstd frame ("truncated"); an empty .gz / .zst file counts as truncated.
// Lines are bounded: a line longer than max_line_bytes (decompressed, without its '\n')
// is RESOURCE_EXHAUSTED naming the file, the line number and its offset, found before
// more than max_line_bytes + 64 KiB of it is buffered. Without the bound a small
// compressed file holding one huge line (1 GiB of text gzips to about 1 MB) makes the
// reader buffer all of it.
// Every line returned is followed by at least kLineReadAheadBytes readable bytes (of any
// content) in the reader's buffer, so a parser that reads ahead (simdjson: json_scan.h)
// can scan the line in place instead of copying it.
// Single-owner (not thread-safe).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_LINE_READER_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_LINE_READER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/shard_file.h"

namespace zephon::pipeline {

enum class Compression { kNone, kGzip, kZstd };

// Default bound on one line: 64 MiB holds a document of about ten million token ids
// as JSON text, far beyond any real sample, while keeping a hostile file to a bounded
// buffer (zephond --max-jsonl-line-bytes).
inline constexpr uint64_t kDefaultMaxLineBytes = uint64_t{64} << 20;

// Readable bytes after every line Next returns (see the file comment).
inline constexpr size_t kLineReadAheadBytes = 64;

// By suffix: ".gz" -> kGzip, ".zst" -> kZstd, else kNone.
Compression CompressionOfPath(std::string_view path);

// A source of decompressed bytes (one implementation per Compression).
class ByteDecoder {
 public:
  virtual ~ByteDecoder() = default;
  // Fills up to `n` bytes of `dst`; returns how many, 0 only at the clean end.
  // DATA_LOSS / INTERNAL on corrupt or truncated input (message without position).
  virtual absl::StatusOr<size_t> Read(char* dst, size_t n) = 0;
};

class LineReader {
 public:
  // NOT_FOUND / PERMISSION_DENIED if `path` cannot be opened for reading;
  // INVALID_ARGUMENT if max_line_bytes is 0.
  static absl::StatusOr<std::unique_ptr<LineReader>> Open(
      const std::string& path, uint64_t max_line_bytes = kDefaultMaxLineBytes);
  // Reads `file` front to back (an object in a store, through the shard cache); the
  // compression follows file->path(). The storage's errors come back from Next like
  // decoding errors, with the line and offset.
  static absl::StatusOr<std::unique_ptr<LineReader>> Open(
      std::unique_ptr<ShardFile> file, uint64_t max_line_bytes = kDefaultMaxLineBytes);
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;

  // Sets *line to the next line (without its '\n'; valid until the next call) and
  // returns true, or returns false at the end of the file. Errors: DATA_LOSS / INTERNAL
  // for corrupt, truncated or unreadable input, RESOURCE_EXHAUSTED for a line longer
  // than max_line_bytes; each names the file, the line number and the offset. After an
  // error the reader must not be used again.
  absl::StatusOr<bool> Next(std::string_view* line);
  // 1-based number of the line last returned by Next.
  uint64_t line_number() const { return line_number_; }
  // Decompressed byte offset of the first byte of the line last returned by Next.
  uint64_t line_offset() const { return line_offset_; }

 private:
  LineReader(std::string path, std::unique_ptr<ByteDecoder> decoder, uint64_t max_line_bytes);
  absl::Status LineTooLong(uint64_t at_least_bytes) const;

  const std::string path_;
  const std::unique_ptr<ByteDecoder> decoder_;
  const uint64_t max_line_bytes_;
  std::string buffer_;
  size_t begin_ = 0;  // buffer_[begin_, end_) holds bytes not yet returned.
  size_t end_ = 0;
  uint64_t buffer_offset_ = 0;  // Decompressed offset of buffer_[0].
  bool eof_ = false;
  uint64_t line_number_ = 0;
  uint64_t line_offset_ = 0;
};

// JSONL records: the next line of `lines` that is not blank (only spaces, tabs and
// CRs), with a UTF-8 byte order mark before the first line removed (*bom says how many
// bytes: 0 or 3). False at the end of the file; errors are Next's.
absl::StatusOr<bool> NextRecordLine(LineReader* lines, std::string_view* line, size_t* bom);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_LINE_READER_H_
