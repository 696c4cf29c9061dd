#include "daemon/pipeline/formats/parquet/encodings.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zephon::pipeline::parquet {
namespace {

// `w` (0..64) bits starting at bit `pos` of p[0, size); the caller has checked that
// pos + w <= size * 8.
inline uint64_t ReadBits(const uint8_t* p, size_t size, uint64_t pos, int w) {
  if (w == 0) return 0;
  const size_t byte = pos >> 3;
  const int shift = static_cast<int>(pos & 7);
  if (w <= 56 && byte + 8 <= size) {
    uint64_t v;
    std::memcpy(&v, p + byte, 8);
    v >>= shift;
    return w == 64 ? v : (v & ((uint64_t{1} << w) - 1));
  }
  uint64_t v = 0;
  int got = 0;
  while (got < w) {
    const uint64_t bit = pos + got;
    const int off = static_cast<int>(bit & 7);
    const int take = (8 - off) < (w - got) ? (8 - off) : (w - got);
    const uint64_t chunk = (p[bit >> 3] >> off) & ((1u << take) - 1);
    v |= chunk << got;
    got += take;
  }
  return v;
}

absl::StatusOr<uint64_t> ReadUleb(std::string_view data, size_t* pos) {
  uint64_t v = 0;
  for (int i = 0; i < 10; ++i) {
    if (*pos >= data.size()) return absl::DataLossError("ULEB128 varint ends early");
    const uint8_t b = static_cast<uint8_t>(data[(*pos)++]);
    v |= static_cast<uint64_t>(b & 0x7F) << (7 * i);
    if ((b & 0x80) == 0) return v;
  }
  return absl::DataLossError("ULEB128 varint longer than 10 bytes");
}

absl::StatusOr<int64_t> ReadZigzag(std::string_view data, size_t* pos) {
  ASSIGN_OR_RETURN(uint64_t z, ReadUleb(data, pos));
  return static_cast<int64_t>((z >> 1) ^ (~(z & 1) + 1));
}

// Exactly `n` DELTA_BINARY_PACKED int32 lengths (DELTA_LENGTH_BYTE_ARRAY's lengths,
// DELTA_BYTE_ARRAY's prefixes) from the start of data; *pos: the bytes they took.
absl::Status DecodeLengths(std::string_view data, size_t n, const char* what,
                           PodVector<int64_t>* out, size_t* pos) {
  RETURN_IF_ERROR(DecodeDeltaBinaryPacked(data, 4, n, out, pos));
  if (out->size() != n) {
    return absl::DataLossError(absl::StrCat(what, " has ", out->size(), " lengths for ", n,
                                            " values"));
  }
  return absl::OkStatus();
}

}  // namespace

template <typename T>
absl::Status DecodeRleHybrid(std::string_view data, int bit_width, size_t n, T* out) {
  if (bit_width < 0 || bit_width > static_cast<int>(8 * sizeof(T))) {
    return absl::DataLossError(
        absl::StrCat("RLE bit width ", bit_width, " is over ", 8 * sizeof(T)));
  }
  const auto* p = reinterpret_cast<const uint8_t*>(data.data());
  size_t pos = 0;
  size_t done = 0;
  const size_t value_bytes = (bit_width + 7) / 8;
  while (done < n) {
    ASSIGN_OR_RETURN(uint64_t header, ReadUleb(data, &pos));
    if ((header & 1) == 0) {
      const uint64_t count = header >> 1;
      if (value_bytes > data.size() - pos) return absl::DataLossError("RLE run value ends early");
      uint32_t v = 0;
      for (size_t i = 0; i < value_bytes; ++i) v |= static_cast<uint32_t>(p[pos + i]) << (8 * i);
      pos += value_bytes;
      if (count == 0) return absl::DataLossError("RLE run of 0 values");
      const size_t take = count < n - done ? count : n - done;
      std::fill(out + done, out + done + take, static_cast<T>(v));
      done += take;
    } else {
      const uint64_t groups = header >> 1;
      if (groups == 0) return absl::DataLossError("bit-packed run of 0 groups");
      if (groups > (data.size() - pos)) {
        return absl::DataLossError("bit-packed run passes the end of the data");
      }
      const uint64_t bytes = groups * bit_width;
      if (bytes > data.size() - pos) {
        return absl::DataLossError("bit-packed run passes the end of the data");
      }
      const uint64_t count = groups * 8;
      const size_t take = count < n - done ? count : n - done;
      const uint8_t* run = p + pos;
      for (size_t i = 0; i < take; ++i) {
        out[done + i] = static_cast<T>(ReadBits(run, bytes, i * bit_width, bit_width));
      }
      done += take;
      pos += bytes;
    }
  }
  return absl::OkStatus();
}

template absl::Status DecodeRleHybrid<uint8_t>(std::string_view, int, size_t, uint8_t*);
template absl::Status DecodeRleHybrid<uint32_t>(std::string_view, int, size_t, uint32_t*);

absl::Status DecodePlainByteArray(std::string_view data, size_t n,
                                  std::vector<std::string_view>* out) {
  // Every value takes at least its 4-byte length.
  if (n > data.size() / 4 + 1) {
    return absl::DataLossError(absl::StrCat("PLAIN data of ", data.size(),
                                            " bytes cannot hold ", n, " strings"));
  }
  out->reserve(out->size() + n);
  size_t pos = 0;
  for (size_t i = 0; i < n; ++i) {
    if (data.size() - pos < 4) {
      return absl::DataLossError(absl::StrCat("PLAIN string ", i, " of ", n, " ends early"));
    }
    uint32_t len;
    std::memcpy(&len, data.data() + pos, 4);
    pos += 4;
    if (len > data.size() - pos) {
      return absl::DataLossError(absl::StrCat("PLAIN string ", i, " of ", len,
                                              " bytes passes the page's end"));
    }
    out->emplace_back(data.data() + pos, len);
    pos += len;
  }
  return absl::OkStatus();
}

absl::Status DecodePlainInts(std::string_view data, int width, size_t n,
                             PodVector<int64_t>* out) {
  if (n > data.size() / width) {
    return absl::DataLossError(absl::StrCat("PLAIN data of ", data.size(), " bytes cannot hold ",
                                            n, " values of ", width, " bytes"));
  }
  const size_t base = out->size();
  out->resize(base + n);
  for (size_t i = 0; i < n; ++i) {
    if (width == 4) {
      int32_t v;
      std::memcpy(&v, data.data() + 4 * i, 4);
      (*out)[base + i] = v;
    } else {
      int64_t v;
      std::memcpy(&v, data.data() + 8 * i, 8);
      (*out)[base + i] = v;
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeDeltaBinaryPacked(std::string_view data, int width, size_t max_values,
                                     PodVector<int64_t>* out, size_t* consumed) {
  size_t pos = 0;
  ASSIGN_OR_RETURN(uint64_t block_size, ReadUleb(data, &pos));
  ASSIGN_OR_RETURN(uint64_t miniblocks, ReadUleb(data, &pos));
  ASSIGN_OR_RETURN(uint64_t total, ReadUleb(data, &pos));
  ASSIGN_OR_RETURN(int64_t first, ReadZigzag(data, &pos));
  if (block_size == 0 || block_size % 128 != 0 || miniblocks == 0 ||
      block_size % miniblocks != 0 || (block_size / miniblocks) % 32 != 0 ||
      block_size > (1u << 20)) {
    return absl::DataLossError(absl::StrCat("DELTA_BINARY_PACKED header has block size ",
                                            block_size, " and ", miniblocks, " miniblocks"));
  }
  if (total > max_values) {
    return absl::DataLossError(absl::StrCat("DELTA_BINARY_PACKED run of ", total,
                                            " values where the page holds ", max_values));
  }
  const uint64_t per_mini = block_size / miniblocks;
  const size_t base = out->size();
  out->resize(base + total);
  int64_t* v = out->data() + base;
  const auto wrap = [width](uint64_t x) -> int64_t {
    return width == 4 ? static_cast<int64_t>(static_cast<int32_t>(static_cast<uint32_t>(x)))
                      : static_cast<int64_t>(x);
  };
  uint64_t prev = static_cast<uint64_t>(first);
  if (total > 0) v[0] = wrap(prev);
  size_t done = total > 0 ? 1 : 0;
  while (done < total) {
    ASSIGN_OR_RETURN(int64_t min_delta, ReadZigzag(data, &pos));
    if (miniblocks > data.size() - pos) {
      return absl::DataLossError("DELTA_BINARY_PACKED bit widths pass the end of the data");
    }
    const auto* widths = reinterpret_cast<const uint8_t*>(data.data() + pos);
    pos += miniblocks;
    for (uint64_t m = 0; m < miniblocks && done < total; ++m) {
      const int w = widths[m];
      if (w > 64) {
        return absl::DataLossError(
            absl::StrCat("DELTA_BINARY_PACKED miniblock bit width ", w, " is too wide"));
      }
      const uint64_t bytes = per_mini * w / 8;
      if (bytes > data.size() - pos) {
        return absl::DataLossError("DELTA_BINARY_PACKED miniblock passes the end of the data");
      }
      const auto* mp = reinterpret_cast<const uint8_t*>(data.data() + pos);
      const uint64_t take = per_mini < total - done ? per_mini : total - done;
      for (uint64_t i = 0; i < take; ++i) {
        prev += static_cast<uint64_t>(min_delta) + ReadBits(mp, bytes, i * w, w);
        v[done++] = wrap(prev);
      }
      pos += bytes;
    }
  }
  *consumed = pos;
  return absl::OkStatus();
}

absl::Status DecodeDeltaLengthByteArray(std::string_view data, size_t n,
                                        std::vector<std::string_view>* out) {
  PodVector<int64_t> lengths;
  size_t pos = 0;
  RETURN_IF_ERROR(DecodeLengths(data, n, "DELTA_LENGTH_BYTE_ARRAY", &lengths, &pos));
  out->reserve(out->size() + n);
  for (size_t i = 0; i < n; ++i) {
    if (lengths[i] < 0 || static_cast<uint64_t>(lengths[i]) > data.size() - pos) {
      return absl::DataLossError(absl::StrCat("DELTA_LENGTH_BYTE_ARRAY value ", i, " of length ",
                                              lengths[i], " passes the page's end"));
    }
    out->emplace_back(data.data() + pos, lengths[i]);
    pos += lengths[i];
  }
  return absl::OkStatus();
}

absl::Status DecodeDeltaByteArray(std::string_view data, size_t n, std::string* arena,
                                  std::vector<std::string_view>* out) {
  PodVector<int64_t> prefixes;
  size_t pos = 0;
  RETURN_IF_ERROR(DecodeLengths(data, n, "DELTA_BYTE_ARRAY's prefixes", &prefixes, &pos));
  std::vector<std::string_view> suffixes;
  RETURN_IF_ERROR(DecodeDeltaLengthByteArray(data.substr(pos), n, &suffixes));
  // Sizes first (each prefix at most the previous value), so the arena is allocated
  // once, within kMaxDecodedPageBytes, and the views into it stay valid.
  uint64_t total = 0, prev_len = 0;
  for (size_t i = 0; i < n; ++i) {
    if (prefixes[i] < 0 || static_cast<uint64_t>(prefixes[i]) > prev_len) {
      return absl::DataLossError(absl::StrCat("DELTA_BYTE_ARRAY value ", i, " has prefix length ",
                                              prefixes[i], " past the previous value's ",
                                              prev_len));
    }
    prev_len = prefixes[i] + suffixes[i].size();
    total += prev_len;
    if (total > kMaxDecodedPageBytes) {
      return absl::DataLossError(absl::StrCat("DELTA_BYTE_ARRAY page rebuilds more than ",
                                              kMaxDecodedPageBytes, " bytes"));
    }
  }
  arena->clear();
  arena->resize(total);
  out->reserve(out->size() + n);
  char* w = arena->data();
  const char* prev = w;
  for (size_t i = 0; i < n; ++i) {
    char* start = w;
    std::memmove(w, prev, prefixes[i]);
    w += prefixes[i];
    std::memcpy(w, suffixes[i].data(), suffixes[i].size());
    w += suffixes[i].size();
    out->emplace_back(start, w - start);
    prev = start;
  }
  return absl::OkStatus();
}

}  // namespace zephon::pipeline::parquet
