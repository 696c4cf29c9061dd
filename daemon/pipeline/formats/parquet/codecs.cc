#include "daemon/pipeline/formats/parquet/codecs.h"

#include <brotli/decode.h>
#include <lz4.h>
#include <snappy.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <climits>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"

namespace zephon::pipeline::parquet {
namespace {

// One zstd decompression context per thread, reused for every page: ZSTD_decompress
// would allocate (and, at its size, mmap and fault in) a fresh context per page.
ZSTD_DCtx* ThreadZstdContext() {
  struct Free {
    void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
  };
  thread_local std::unique_ptr<ZSTD_DCtx, Free> context(ZSTD_createDCtx());
  return context.get();
}

absl::Status WrongSize(Codec codec, size_t got, size_t want) {
  return absl::DataLossError(absl::StrCat(CodecName(codec), " data decompresses to ", got,
                                          " bytes, the page header says ", want));
}

absl::Status Corrupt(Codec codec, const char* why) {
  return absl::DataLossError(absl::StrCat("corrupt ", CodecName(codec), " data: ", why));
}

// GZIP pages are one or more gzip members (zlib also accepts a zlib header).
absl::Status Inflate(std::string_view in, size_t expected, char* out) {
  z_stream z{};
  if (inflateInit2(&z, 15 + 32) != Z_OK) return absl::InternalError("inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out);
  z.avail_out = static_cast<uInt>(expected);
  absl::Status status;
  while (true) {
    const int rc = inflate(&z, Z_FINISH);
    if (rc == Z_STREAM_END) {
      if (z.avail_in == 0) break;
      // Another gzip member follows.
      if (inflateReset(&z) != Z_OK) {
        status = Corrupt(Codec::kGzip, "inflateReset failed");
        break;
      }
      continue;
    }
    if (rc == Z_BUF_ERROR && z.avail_out == 0) {
      status = absl::DataLossError(absl::StrCat(
          "GZIP data decompresses to more than the page header's ", expected, " bytes"));
    } else {
      status = Corrupt(Codec::kGzip, z.msg != nullptr ? z.msg : "inflate failed");
    }
    break;
  }
  const size_t got = expected - z.avail_out;
  inflateEnd(&z);
  if (!status.ok()) return status;
  if (got != expected) return WrongSize(Codec::kGzip, got, expected);
  return absl::OkStatus();
}

// LZ4_decompress_safe of `in` into out[0, capacity): the decompressed size, or -1 when
// the block is corrupt or would not fit. Never writes past `capacity`.
int Lz4Block(std::string_view in, char* out, size_t capacity) {
  return LZ4_decompress_safe(in.data(), out, static_cast<int>(in.size()),
                             static_cast<int>(capacity));
}

uint32_t BigEndian32(const char* p) {
  const auto* b = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) | (uint32_t{b[2]} << 8) | b[3];
}

// The Hadoop framing of the deprecated LZ4 codec (parquet-java and Hadoop's Lz4Codec
// write it): one or more frames of big-endian u32 decompressed size, big-endian u32
// compressed size, then an LZ4 block of that compressed size. True when `in` is exactly
// such frames and they decompress to exactly `expected` bytes; false as soon as a frame
// does not fit (a length past the page or past `expected`, a block that fails or gives
// another size than its frame says), so the caller can try the raw block instead. Every
// length is bounded by the page's compressed and uncompressed sizes before it is used.
bool TryLz4Hadoop(std::string_view in, size_t expected, char* out) {
  constexpr size_t kFrameHeader = 8;
  size_t written = 0;
  while (in.size() >= kFrameHeader) {
    const size_t decompressed = BigEndian32(in.data());
    const size_t compressed = BigEndian32(in.data() + 4);
    in.remove_prefix(kFrameHeader);
    if (compressed > in.size() || decompressed > expected - written) return false;
    const int n = Lz4Block(in.substr(0, compressed), out + written, decompressed);
    if (n < 0 || static_cast<size_t>(n) != decompressed) return false;
    in.remove_prefix(compressed);
    written += decompressed;
  }
  return in.empty() && written == expected;
}

// LZ4 (codec 5, deprecated): Hadoop-framed blocks (parquet-java, Hadoop), else one raw
// LZ4 block (what parquet-cpp wrote before it adopted the framing), as Arrow reads it.
absl::Status DecompressLz4(std::string_view in, size_t expected, char* out) {
  if (TryLz4Hadoop(in, expected, out)) return absl::OkStatus();
  const int n = Lz4Block(in, out, expected);
  if (n < 0) {
    return Corrupt(Codec::kLz4, "neither Hadoop-framed LZ4 blocks nor one raw LZ4 block of "
                                "the page header's size");
  }
  if (static_cast<size_t>(n) != expected) return WrongSize(Codec::kLz4, n, expected);
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckCodecSupported(Codec codec) {
  switch (codec) {
    case Codec::kUncompressed:
    case Codec::kSnappy:
    case Codec::kGzip:
    case Codec::kZstd:
    case Codec::kLz4Raw:
    case Codec::kBrotli:
    case Codec::kLz4:
      return absl::OkStatus();
    case Codec::kLzo:
      return absl::UnimplementedError(
          "compression codec LZO is not supported: rewrite the file with ZSTD or SNAPPY");
  }
  return absl::DataLossError(
      absl::StrCat("unknown compression codec ", static_cast<int>(codec)));
}

absl::Status Decompress(Codec codec, std::string_view in, size_t expected_size, char* out) {
  if (absl::Status s = CheckCodecSupported(codec); !s.ok()) return s;
  if (in.size() > UINT_MAX || expected_size > UINT_MAX) {
    return absl::DataLossError("page larger than 4 GiB");
  }
  switch (codec) {
    case Codec::kUncompressed:
      if (in.size() != expected_size) return WrongSize(codec, in.size(), expected_size);
      if (!in.empty()) std::memcpy(out, in.data(), in.size());
      return absl::OkStatus();
    case Codec::kSnappy: {
      size_t n = 0;
      if (!snappy::GetUncompressedLength(in.data(), in.size(), &n)) {
        return Corrupt(codec, "bad length preamble");
      }
      if (n != expected_size) return WrongSize(codec, n, expected_size);
      if (!snappy::RawUncompress(in.data(), in.size(), out)) {
        return Corrupt(codec, "RawUncompress failed");
      }
      return absl::OkStatus();
    }
    case Codec::kGzip:
      return Inflate(in, expected_size, out);
    case Codec::kZstd: {
      ZSTD_DCtx* context = ThreadZstdContext();
      if (context == nullptr) return absl::ResourceExhaustedError("ZSTD_createDCtx failed");
      const size_t n = ZSTD_decompressDCtx(context, out, expected_size, in.data(), in.size());
      if (ZSTD_isError(n)) {
        if (ZSTD_getErrorCode(n) == ZSTD_error_dstSize_tooSmall) {
          return absl::DataLossError(absl::StrCat(
              "ZSTD data decompresses to more than the page header's ", expected_size,
              " bytes"));
        }
        return Corrupt(codec, ZSTD_getErrorName(n));
      }
      if (n != expected_size) return WrongSize(codec, n, expected_size);
      return absl::OkStatus();
    }
    case Codec::kLz4:
      return DecompressLz4(in, expected_size, out);
    case Codec::kLz4Raw: {
      const int n = Lz4Block(in, out, expected_size);
      if (n < 0) {
        return Corrupt(codec, "LZ4_decompress_safe failed (corrupt, or larger than the "
                              "page header's size)");
      }
      if (static_cast<size_t>(n) != expected_size) return WrongSize(codec, n, expected_size);
      return absl::OkStatus();
    }
    case Codec::kBrotli: {
      size_t n = expected_size;
      const BrotliDecoderResult rc = BrotliDecoderDecompress(
          in.size(), reinterpret_cast<const uint8_t*>(in.data()), &n,
          reinterpret_cast<uint8_t*>(out));
      if (rc == BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT) {
        return absl::DataLossError(absl::StrCat(
            "BROTLI data decompresses to more than the page header's ", expected_size,
            " bytes"));
      }
      if (rc != BROTLI_DECODER_RESULT_SUCCESS) return Corrupt(codec, "BrotliDecoderDecompress failed");
      if (n != expected_size) return WrongSize(codec, n, expected_size);
      return absl::OkStatus();
    }
    default:
      break;
  }
  return absl::InternalError("unreachable codec");
}

uint32_t PageCrc32(std::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // crc32 takes a uInt length; feed large pages in pieces.
  while (!bytes.empty()) {
    const size_t n = bytes.size() < (1u << 30) ? bytes.size() : (1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(n));
    bytes.remove_prefix(n);
  }
  return static_cast<uint32_t>(crc);
}

}  // namespace zephon::pipeline::parquet
