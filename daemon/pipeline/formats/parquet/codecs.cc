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

}  // namespace

absl::Status CheckCodecSupported(Codec codec) {
  switch (codec) {
    case Codec::kUncompressed:
    case Codec::kSnappy:
    case Codec::kGzip:
    case Codec::kZstd:
    case Codec::kLz4Raw:
    case Codec::kBrotli:
      return absl::OkStatus();
    case Codec::kLz4:
      return absl::UnimplementedError(
          "compression codec LZ4 (the deprecated Hadoop-framed LZ4) is not supported: "
          "rewrite the file with LZ4_RAW, ZSTD or SNAPPY");
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
    case Codec::kLz4Raw: {
      const int n = LZ4_decompress_safe(in.data(), out, static_cast<int>(in.size()),
                                        static_cast<int>(expected_size));
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
