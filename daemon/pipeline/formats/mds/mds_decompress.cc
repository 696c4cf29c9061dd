#include "daemon/pipeline/formats/mds/mds_decompress.h"

#include <brotli/decode.h>
#include <bzlib.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"

namespace zephon::pipeline::mds {
namespace {

// The output buffer: starts small and doubles up to the cap as the decoder fills it.
class Output {
 public:
  // Starts at 4x the input (64 KiB at least): most shards need a doubling or two.
  Output(uint64_t cap, size_t input) : cap_(cap) {
    const uint64_t start = std::max<uint64_t>(uint64_t{64} << 10, uint64_t{4} * input);
    buf_.resize(static_cast<size_t>(std::min<uint64_t>(cap_, start)));
  }
  // Free space after `used` bytes, growing first if full and below the cap; false when
  // full at the cap (the input holds more than raw_data.bytes).
  bool Room(size_t used, char** next, size_t* avail) {
    if (used == buf_.size()) {
      if (buf_.size() >= cap_) return false;
      buf_.resize(static_cast<size_t>(std::min<uint64_t>(cap_, buf_.size() * 2 + 1)));
    }
    *next = buf_.data() + used;
    *avail = buf_.size() - used;
    return true;
  }
  // The output, `used` bytes long; may still have a spare byte beyond the cap check.
  std::string Take(size_t used) {
    buf_.resize(used);
    return std::move(buf_);
  }

 private:
  uint64_t cap_;
  std::string buf_;
};

// A decoder step: consumes from *in/*in_left, produces into out/out_left; returns
// 1 at the end of the stream, 0 to go on, -1 on corrupt input (with *why).
template <typename Step>
absl::StatusOr<std::string> Drive(absl::string_view family, absl::string_view name,
                                  absl::string_view compressed, uint64_t raw_bytes,
                                  Step step) {
  // One spare byte past raw_bytes shows when the data decompresses to more.
  Output out(raw_bytes + 1, compressed.size());
  const char* in = compressed.data();
  size_t in_left = compressed.size();
  size_t used = 0;
  for (;;) {
    char* next = nullptr;
    size_t avail = 0;
    if (!out.Room(used, &next, &avail)) break;
    std::string why;
    size_t produced = 0;
    const int r = step(&in, &in_left, next, avail, &produced, &why);
    used += produced;
    if (r < 0) {
      return absl::DataLossError(absl::StrCat("MDS shard ", name, ": corrupt ", family,
                                              " data: ", why));
    }
    if (r == 1) break;
    if (produced == 0 && in_left == 0) {
      return absl::DataLossError(absl::StrCat("MDS shard ", name, ": ", family,
                                              " data ends early (truncated file?) after ",
                                              used, " decompressed bytes"));
    }
  }
  if (used != raw_bytes) {
    return absl::DataLossError(absl::StrCat(
        "MDS shard ", name, ": decompresses to ", used > raw_bytes ? "more than " : "",
        used, " bytes, but the index's raw_data.bytes is ", raw_bytes,
        " (the shard or the index is corrupt or from another write)"));
  }
  return out.Take(used);
}

absl::StatusOr<std::string> Zstd(absl::string_view name, absl::string_view in, uint64_t raw) {
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  return Drive("zstd", name, in, raw,
               [&](const char** p, size_t* left, char* out, size_t avail, size_t* produced,
                   std::string* why) {
                 ZSTD_inBuffer ib{*p, *left, 0};
                 ZSTD_outBuffer ob{out, avail, 0};
                 const size_t r = ZSTD_decompressStream(ctx.get(), &ob, &ib);
                 *p += ib.pos;
                 *left -= ib.pos;
                 *produced = ob.pos;
                 if (ZSTD_isError(r)) {
                   *why = ZSTD_getErrorName(r);
                   return -1;
                 }
                 // r == 0: a frame ended. Streaming writes one; like zstd.decompress,
                 // frames that follow are decoded too.
                 return (r == 0 && *left == 0) ? 1 : 0;
               });
}

absl::StatusOr<std::string> Gzip(absl::string_view name, absl::string_view in, uint64_t raw) {
  z_stream zs{};
  if (inflateInit2(&zs, 16 + MAX_WBITS) != Z_OK) {
    return absl::ResourceExhaustedError("inflateInit2 failed (out of memory?)");
  }
  std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, inflateEnd);
  return Drive("gzip", name, in, raw,
               [&](const char** p, size_t* left, char* out, size_t avail, size_t* produced,
                   std::string* why) {
                 const uInt in_n = static_cast<uInt>(std::min<size_t>(*left, 1u << 30));
                 const uInt out_n = static_cast<uInt>(std::min<size_t>(avail, 1u << 30));
                 zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(*p));
                 zs.avail_in = in_n;
                 zs.next_out = reinterpret_cast<Bytef*>(out);
                 zs.avail_out = out_n;
                 const int r = inflate(&zs, Z_NO_FLUSH);
                 *p += in_n - zs.avail_in;
                 *left -= in_n - zs.avail_in;
                 *produced = out_n - zs.avail_out;
                 if (r == Z_STREAM_END) {
                   if (*left == 0) return 1;
                   // Another member follows (gzip.decompress reads them all).
                   if (inflateReset(&zs) != Z_OK) {
                     *why = "inflateReset failed";
                     return -1;
                   }
                   return 0;
                 }
                 if (r != Z_OK && r != Z_BUF_ERROR) {
                   *why = zs.msg != nullptr ? zs.msg : absl::StrCat("zlib error ", r);
                   return -1;
                 }
                 return 0;
               });
}

absl::StatusOr<std::string> Bzip2(absl::string_view name, absl::string_view in, uint64_t raw) {
  bz_stream bz{};
  if (BZ2_bzDecompressInit(&bz, 0, 0) != BZ_OK) {
    return absl::ResourceExhaustedError("BZ2_bzDecompressInit failed (out of memory?)");
  }
  std::unique_ptr<bz_stream, int (*)(bz_stream*)> guard(&bz, BZ2_bzDecompressEnd);
  return Drive("bz2", name, in, raw,
               [&](const char** p, size_t* left, char* out, size_t avail, size_t* produced,
                   std::string* why) {
                 const unsigned in_n = static_cast<unsigned>(std::min<size_t>(*left, 1u << 30));
                 const unsigned out_n = static_cast<unsigned>(std::min<size_t>(avail, 1u << 30));
                 bz.next_in = const_cast<char*>(*p);
                 bz.avail_in = in_n;
                 bz.next_out = out;
                 bz.avail_out = out_n;
                 const int r = BZ2_bzDecompress(&bz);
                 *p += in_n - bz.avail_in;
                 *left -= in_n - bz.avail_in;
                 *produced = out_n - bz.avail_out;
                 if (r == BZ_STREAM_END) {
                   if (*left == 0) return 1;
                   // Another stream follows (bz2.decompress reads them all).
                   BZ2_bzDecompressEnd(&bz);
                   if (BZ2_bzDecompressInit(&bz, 0, 0) != BZ_OK) {
                     *why = "BZ2_bzDecompressInit failed";
                     return -1;
                   }
                   return 0;
                 }
                 if (r != BZ_OK) {
                   *why = absl::StrCat("libbz2 error ", r);
                   return -1;
                 }
                 return 0;
               });
}

absl::StatusOr<std::string> Brotli(absl::string_view name, absl::string_view in, uint64_t raw) {
  std::unique_ptr<BrotliDecoderState, void (*)(BrotliDecoderState*)> st(
      BrotliDecoderCreateInstance(nullptr, nullptr, nullptr), BrotliDecoderDestroyInstance);
  if (st == nullptr) return absl::ResourceExhaustedError("BrotliDecoderCreateInstance failed");
  return Drive("brotli", name, in, raw,
               [&](const char** p, size_t* left, char* out, size_t avail, size_t* produced,
                   std::string* why) {
                 const uint8_t* next_in = reinterpret_cast<const uint8_t*>(*p);
                 uint8_t* next_out = reinterpret_cast<uint8_t*>(out);
                 size_t out_left = avail;
                 const BrotliDecoderResult r = BrotliDecoderDecompressStream(
                     st.get(), left, &next_in, &out_left, &next_out, nullptr);
                 *p = reinterpret_cast<const char*>(next_in);
                 *produced = avail - out_left;
                 if (r == BROTLI_DECODER_RESULT_SUCCESS) {
                   if (*left != 0) {
                     *why = "bytes after the brotli stream";
                     return -1;
                   }
                   return 1;
                 }
                 if (r == BROTLI_DECODER_RESULT_ERROR) {
                   *why = BrotliDecoderErrorString(BrotliDecoderGetErrorCode(st.get()));
                   return -1;
                 }
                 return 0;
               });
}

// Raw snappy states its length up front: checked against raw_data.bytes before any
// allocation, then decoded in one call.
absl::StatusOr<std::string> Snappy(absl::string_view name, absl::string_view in, uint64_t raw) {
  size_t length = 0;
  if (snappy_uncompressed_length(in.data(), in.size(), &length) != SNAPPY_OK) {
    return absl::DataLossError(absl::StrCat("MDS shard ", name,
                                            ": corrupt snappy data (no valid length header; "
                                            "Streaming writes raw snappy, not framed)"));
  }
  if (length != raw) {
    return absl::DataLossError(absl::StrCat(
        "MDS shard ", name, ": decompresses to ", length,
        " bytes, but the index's raw_data.bytes is ", raw,
        " (the shard or the index is corrupt or from another write)"));
  }
  if (snappy_validate_compressed_buffer(in.data(), in.size()) != SNAPPY_OK) {
    return absl::DataLossError(absl::StrCat("MDS shard ", name, ": corrupt snappy data"));
  }
  std::string out(length, '\0');
  size_t n = length;
  if (snappy_uncompress(in.data(), in.size(), out.data(), &n) != SNAPPY_OK || n != length) {
    return absl::DataLossError(absl::StrCat("MDS shard ", name, ": corrupt snappy data"));
  }
  return out;
}

}  // namespace

absl::StatusOr<std::string> DecompressMdsShard(MdsCompression compression,
                                               absl::string_view name,
                                               absl::string_view compressed,
                                               uint64_t raw_bytes) {
  switch (compression) {
    case MdsCompression::kNone: return std::string(compressed);
    case MdsCompression::kZstd: return Zstd(name, compressed, raw_bytes);
    case MdsCompression::kGzip: return Gzip(name, compressed, raw_bytes);
    case MdsCompression::kBzip2: return Bzip2(name, compressed, raw_bytes);
    case MdsCompression::kBrotli: return Brotli(name, compressed, raw_bytes);
    case MdsCompression::kSnappy: return Snappy(name, compressed, raw_bytes);
  }
  return absl::InternalError("unknown MdsCompression");
}

}  // namespace zephon::pipeline::mds
