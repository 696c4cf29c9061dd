#include "daemon/pipeline/formats/line_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <zlib.h>
#include <zstd.h>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zephon::pipeline {
namespace {

bool HasSuffix(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

constexpr size_t kInputBytes = 1 << 16;
constexpr size_t kMinReadBytes = 1 << 16;

// A sequential source of the (compressed) file bytes under a decoder.
class Input {
 public:
  virtual ~Input() = default;
  // Fills up to `n` bytes of `dst`; returns how many, 0 only at the end.
  virtual absl::StatusOr<size_t> Read(char* dst, size_t n) = 0;
};

// Owns one file descriptor opened for reading.
class FdInput final : public Input {
 public:
  explicit FdInput(int fd) : fd_(fd) {}
  FdInput(const FdInput&) = delete;
  FdInput& operator=(const FdInput&) = delete;
  ~FdInput() override { close(fd_); }

  absl::StatusOr<size_t> Read(char* dst, size_t n) override {
    while (true) {
      const ssize_t got = read(fd_, dst, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return absl::InternalError(absl::StrCat("read: ", strerror(errno)));
    }
  }

 private:
  const int fd_;
};

// Reads a ShardFile (e.g. an object through the shard cache) front to back.
class ShardFileInput final : public Input {
 public:
  explicit ShardFileInput(std::unique_ptr<ShardFile> file) : file_(std::move(file)) {}

  absl::StatusOr<size_t> Read(char* dst, size_t n) override {
    const uint64_t take = std::min<uint64_t>(n, file_->size() - pos_);
    const absl::Status s = file_->ReadAt(pos_, take, dst);
    if (!s.ok()) return s;
    pos_ += take;
    return static_cast<size_t>(take);
  }

 private:
  const std::unique_ptr<ShardFile> file_;
  uint64_t pos_ = 0;
};

class PlainDecoder final : public ByteDecoder {
 public:
  explicit PlainDecoder(std::unique_ptr<Input> file) : file_(std::move(file)) {}
  absl::StatusOr<size_t> Read(char* dst, size_t n) override { return file_->Read(dst, n); }

 private:
  const std::unique_ptr<Input> file_;
};

class GzipDecoder final : public ByteDecoder {
 public:
  explicit GzipDecoder(std::unique_ptr<Input> file)
      : file_(std::move(file)), input_(kInputBytes, '\0') {
    std::memset(&strm_, 0, sizeof(strm_));
    init_ = inflateInit2(&strm_, 16 + MAX_WBITS);  // 16: gzip wrapper only.
  }
  GzipDecoder(const GzipDecoder&) = delete;
  GzipDecoder& operator=(const GzipDecoder&) = delete;
  ~GzipDecoder() override {
    if (init_ == Z_OK) inflateEnd(&strm_);
  }

  absl::StatusOr<size_t> Read(char* dst, size_t n) override {
    if (init_ != Z_OK) return absl::InternalError("inflateInit2 failed");
    while (true) {
      if (strm_.avail_in == 0 && !eof_) {
        auto got = file_->Read(input_.data(), input_.size());
        if (!got.ok()) return got.status();
        total_in_ += *got;
        eof_ = *got == 0;
        strm_.next_in = reinterpret_cast<Bytef*>(input_.data());
        strm_.avail_in = static_cast<uInt>(*got);
      }
      if (member_done_) {
        if (strm_.avail_in == 0) return 0;  // eof_ here: the clean end.
        inflateReset(&strm_);               // Another gzip member follows.
        member_done_ = false;
      }
      if (strm_.avail_in == 0 && eof_ && total_in_ == 0) {
        return absl::DataLossError("truncated gzip stream (empty file)");
      }
      strm_.next_out = reinterpret_cast<Bytef*>(dst);
      strm_.avail_out = static_cast<uInt>(n);
      const int ret = inflate(&strm_, Z_NO_FLUSH);
      const size_t produced = n - strm_.avail_out;
      if (ret == Z_STREAM_END) {
        member_done_ = true;
      } else if (ret != Z_OK && ret != Z_BUF_ERROR) {
        return absl::DataLossError(absl::StrCat("corrupt gzip stream: ",
                                                strm_.msg ? strm_.msg : zError(ret)));
      }
      if (produced > 0) return produced;
      if (!member_done_ && strm_.avail_in == 0 && eof_) {
        return absl::DataLossError("truncated gzip stream (ends inside a member)");
      }
    }
  }

 private:
  const std::unique_ptr<Input> file_;
  std::string input_;
  z_stream strm_;
  int init_ = Z_OK;
  bool eof_ = false;
  bool member_done_ = false;
  uint64_t total_in_ = 0;
};

class ZstdDecoder final : public ByteDecoder {
 public:
  explicit ZstdDecoder(std::unique_ptr<Input> file)
      : file_(std::move(file)), input_(kInputBytes, '\0'), dctx_(ZSTD_createDCtx()) {}
  ZstdDecoder(const ZstdDecoder&) = delete;
  ZstdDecoder& operator=(const ZstdDecoder&) = delete;
  ~ZstdDecoder() override { ZSTD_freeDCtx(dctx_); }

  absl::StatusOr<size_t> Read(char* dst, size_t n) override {
    if (dctx_ == nullptr) return absl::InternalError("ZSTD_createDCtx failed");
    while (true) {
      if (in_.pos == in_.size && !eof_) {
        auto got = file_->Read(input_.data(), input_.size());
        if (!got.ok()) return got.status();
        total_in_ += *got;
        eof_ = *got == 0;
        in_ = ZSTD_inBuffer{input_.data(), *got, 0};
      }
      if (in_.pos == in_.size && eof_) {
        if (total_in_ == 0) return absl::DataLossError("truncated zstd stream (empty file)");
        if (frame_done_) return 0;  // Everything flushed: the clean end.
      }
      ZSTD_outBuffer out{dst, n, 0};
      const size_t ret = ZSTD_decompressStream(dctx_, &out, &in_);
      if (ZSTD_isError(ret)) {
        return absl::DataLossError(
            absl::StrCat("corrupt zstd stream: ", ZSTD_getErrorName(ret)));
      }
      frame_done_ = ret == 0;
      if (out.pos > 0) return out.pos;
      if (!frame_done_ && in_.pos == in_.size && eof_) {
        return absl::DataLossError("truncated zstd stream (ends inside a frame)");
      }
    }
  }

 private:
  const std::unique_ptr<Input> file_;
  std::string input_;
  ZSTD_DCtx* const dctx_;
  ZSTD_inBuffer in_{nullptr, 0, 0};
  bool eof_ = false;
  bool frame_done_ = false;
  uint64_t total_in_ = 0;
};

std::unique_ptr<ByteDecoder> MakeDecoder(std::string_view path, std::unique_ptr<Input> input) {
  switch (CompressionOfPath(path)) {
    case Compression::kGzip: return std::make_unique<GzipDecoder>(std::move(input));
    case Compression::kZstd: return std::make_unique<ZstdDecoder>(std::move(input));
    case Compression::kNone: break;
  }
  return std::make_unique<PlainDecoder>(std::move(input));
}

}  // namespace

absl::StatusOr<bool> NextRecordLine(LineReader* lines, std::string_view* line, size_t* bom) {
  while (true) {
    ASSIGN_OR_RETURN(bool more, lines->Next(line));
    if (!more) return false;
    *bom = lines->line_number() == 1 && line->substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
    line->remove_prefix(*bom);
    for (char c : *line) {
      if (c != ' ' && c != '\t' && c != '\r') return true;
    }
  }
}

Compression CompressionOfPath(std::string_view path) {
  if (HasSuffix(path, ".gz")) return Compression::kGzip;
  if (HasSuffix(path, ".zst")) return Compression::kZstd;
  return Compression::kNone;
}

namespace {

absl::Status CheckMaxLineBytes(const std::string& path, uint64_t max_line_bytes) {
  if (max_line_bytes == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the maximum line length must be at least 1 byte, got 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LineReader>> LineReader::Open(const std::string& path,
                                                             uint64_t max_line_bytes) {
  if (absl::Status s = CheckMaxLineBytes(path, max_line_bytes); !s.ok()) return s;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    std::string msg = absl::StrCat("cannot open ", path, ": ", strerror(err));
    return err == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  return std::unique_ptr<LineReader>(new LineReader(
      path, MakeDecoder(path, std::make_unique<FdInput>(fd)), max_line_bytes));
}

absl::StatusOr<std::unique_ptr<LineReader>> LineReader::Open(std::unique_ptr<ShardFile> file,
                                                             uint64_t max_line_bytes) {
  const std::string path = file->path();
  if (absl::Status s = CheckMaxLineBytes(path, max_line_bytes); !s.ok()) return s;
  return std::unique_ptr<LineReader>(new LineReader(
      path, MakeDecoder(path, std::make_unique<ShardFileInput>(std::move(file))),
      max_line_bytes));
}

LineReader::LineReader(std::string path, std::unique_ptr<ByteDecoder> decoder,
                       uint64_t max_line_bytes)
    : path_(std::move(path)), decoder_(std::move(decoder)), max_line_bytes_(max_line_bytes) {}

absl::Status LineReader::LineTooLong(uint64_t at_least_bytes) const {
  return absl::ResourceExhaustedError(absl::StrCat(
      path_, ": line ", line_number_ + 1, " (decompressed byte offset ",
      buffer_offset_ + begin_, ") is longer than the limit of ", max_line_bytes_,
      " bytes (at least ", at_least_bytes,
      " bytes without a newline); split the document into shorter lines, or raise "
      "zephond --max-jsonl-line-bytes if such lines are intended"));
}

absl::StatusOr<bool> LineReader::Next(std::string_view* line) {
  size_t scan = begin_;  // Bytes before `scan` are known not to hold '\n'.
  while (true) {
    const void* nl = std::memchr(buffer_.data() + scan, '\n', end_ - scan);
    if (nl != nullptr || (eof_ && end_ > begin_)) {
      const size_t stop = nl ? static_cast<const char*>(nl) - buffer_.data() : end_;
      if (stop - begin_ > max_line_bytes_) return LineTooLong(stop - begin_);
      *line = std::string_view(buffer_.data() + begin_, stop - begin_);
      ++line_number_;
      line_offset_ = buffer_offset_ + begin_;
      begin_ = nl ? stop + 1 : stop;
      return true;
    }
    if (eof_) return false;
    // No '\n' in [begin_, end_): the line is at least that long. Stop before buffering
    // more of a line that is already over the limit.
    if (end_ - begin_ > max_line_bytes_) return LineTooLong(end_ - begin_);
    scan = end_;
    // Make room: drop consumed bytes, then grow if less than kMinReadBytes is free.
    if (begin_ > 0) {
      std::memmove(buffer_.data(), buffer_.data() + begin_, end_ - begin_);
      buffer_offset_ += begin_;
      scan -= begin_;
      end_ -= begin_;
      begin_ = 0;
    }
    // The last kLineReadAheadBytes of the buffer are never filled: they follow every line.
    constexpr size_t kSpare = kMinReadBytes + kLineReadAheadBytes;
    if (buffer_.size() - end_ < kSpare) {
      // Doubling, but never past what a longest allowed line (plus its '\n'), one read
      // and the read-ahead need: end_ <= max_line_bytes_ here, so the cap leaves a read.
      const uint64_t cap = max_line_bytes_ > UINT64_MAX - 2 * kSpare
                               ? UINT64_MAX
                               : max_line_bytes_ + 1 + kSpare;
      buffer_.resize(static_cast<size_t>(
          std::min<uint64_t>(std::max(2 * buffer_.size(), end_ + kSpare), cap)));
    }
    auto got = decoder_->Read(buffer_.data() + end_,
                              buffer_.size() - kLineReadAheadBytes - end_);
    if (!got.ok()) {
      return absl::Status(got.status().code(),
                          absl::StrCat(path_, ": line ", line_number_ + 1,
                                       " (decompressed byte offset ", buffer_offset_ + end_,
                                       "): ", got.status().message()));
    }
    end_ += *got;
    eof_ = *got == 0;
  }
}

}  // namespace zephon::pipeline
