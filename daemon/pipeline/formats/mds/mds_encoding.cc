#include "daemon/pipeline/formats/mds/mds_encoding.h"

#include <cstring>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace zephon::pipeline::mds {
namespace {

struct DtypeRow {
  MdsDtype dtype;
  absl::string_view name;
  size_t bytes;
  bool integer;
  uint8_t code;  // the dtype byte of a dynamic-dtype ndarray value
};

constexpr DtypeRow kDtypes[] = {
    {MdsDtype::kUint8, "uint8", 1, true, 8},       {MdsDtype::kInt8, "int8", 1, true, 9},
    {MdsDtype::kUint16, "uint16", 2, true, 16},    {MdsDtype::kInt16, "int16", 2, true, 17},
    {MdsDtype::kFloat16, "float16", 2, false, 18}, {MdsDtype::kUint32, "uint32", 4, true, 32},
    {MdsDtype::kInt32, "int32", 4, true, 33},      {MdsDtype::kFloat32, "float32", 4, false, 34},
    {MdsDtype::kUint64, "uint64", 8, true, 64},    {MdsDtype::kInt64, "int64", 8, true, 65},
    {MdsDtype::kFloat64, "float64", 8, false, 66},
};

const DtypeRow& Row(MdsDtype dtype) {
  for (const DtypeRow& row : kDtypes) {
    if (row.dtype == dtype) return row;
  }
  return kDtypes[0];  // unreachable: every enumerator has a row
}

// Encodings Streaming knows that are neither text nor token ids.
constexpr absl::string_view kOtherEncodings[] = {
    "str_int", "str_float", "str_decimal", "pil",       "jpeg",       "png",  "jpeg_array",
    "jpegarray", "list[pil]", "list[jpeg]", "list[png]", "pkl", "json",
};

// Little-endian integer of `n` bytes at p, widened.
uint64_t LoadUnsigned(const char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  return v;
}

int64_t LoadSigned(const char* p, size_t n) {
  const uint64_t v = LoadUnsigned(p, n);
  const int shift = static_cast<int>(64 - 8 * n);
  return static_cast<int64_t>(v << shift) >> shift;
}

}  // namespace

std::optional<MdsDtype> MdsDtypeFromName(absl::string_view name) {
  for (const DtypeRow& row : kDtypes) {
    if (row.name == name) return row.dtype;
  }
  return std::nullopt;
}

absl::string_view MdsDtypeName(MdsDtype dtype) { return Row(dtype).name; }
size_t MdsDtypeBytes(MdsDtype dtype) { return Row(dtype).bytes; }
bool MdsDtypeIsInteger(MdsDtype dtype) { return Row(dtype).integer; }

std::optional<uint64_t> MdsEncoding::FixedSize() const {
  switch (kind) {
    case Kind::kScalar:
      return MdsDtypeBytes(*dtype);
    case Kind::kNdarray: {
      if (!dtype || !shape) return std::nullopt;
      uint64_t n = MdsDtypeBytes(*dtype);
      for (uint64_t d : *shape) n *= d;  // dims are bounded at parse: no overflow
      return n;
    }
    default:
      return std::nullopt;
  }
}

absl::StatusOr<MdsEncoding> ParseMdsEncoding(absl::string_view text) {
  MdsEncoding e;
  e.text = std::string(text);
  if (text == "str") {
    e.kind = MdsEncoding::Kind::kStr;
    return e;
  }
  if (text == "bytes") {
    e.kind = MdsEncoding::Kind::kBytes;
    return e;
  }
  if (text == "int") {  // Streaming's Int stores an int64
    e.kind = MdsEncoding::Kind::kScalar;
    e.dtype = MdsDtype::kInt64;
    return e;
  }
  if (std::optional<MdsDtype> d = MdsDtypeFromName(text)) {
    e.kind = MdsEncoding::Kind::kScalar;
    e.dtype = d;
    return e;
  }
  for (absl::string_view other : kOtherEncodings) {
    if (text == other) return e;  // kOther
  }
  if (text == "ndarray" || text.substr(0, 8) == "ndarray:") {
    e.kind = MdsEncoding::Kind::kNdarray;
    if (text == "ndarray") return e;
    const std::vector<absl::string_view> args = absl::StrSplit(text.substr(8), ':');
    if (args.size() > 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          "MDS encoding \"", text, "\" has more than ndarray:DTYPE:SHAPE"));
    }
    e.dtype = MdsDtypeFromName(args[0]);
    if (!e.dtype) {
      return absl::UnimplementedError(absl::StrCat("MDS encoding \"", text,
                                                   "\": unknown ndarray dtype \"", args[0],
                                                   "\" (Streaming's: uint8..int64, float16..64)"));
    }
    if (args.size() == 2) {
      std::vector<uint64_t> shape;
      // Streaming refuses dims < 1; the 2^32 cap per dim and 4 GiB in all (a shard's
      // offsets are uint32) keep FixedSize() free of overflow.
      unsigned __int128 total = MdsDtypeBytes(*e.dtype);
      for (absl::string_view dim : absl::StrSplit(args[1], ',')) {
        uint64_t d = 0;
        if (!absl::SimpleAtoi(dim, &d) || d < 1 || d > (uint64_t{1} << 32)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "MDS encoding \"", text, "\": shape dimension \"", dim,
              "\" is not an integer in [1, 2^32]"));
        }
        total *= d;
        if (total > (uint64_t{1} << 32)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "MDS encoding \"", text, "\": a value of this shape exceeds 4 GiB, more than an "
              "MDS shard can hold"));
        }
        shape.push_back(d);
      }
      e.shape = std::move(shape);
    }
    return e;
  }
  return absl::UnimplementedError(absl::StrCat(
      "MDS encoding \"", text, "\" is not one Zephon knows (Streaming's encodings: str, bytes, "
      "int, uint8..uint64, int8..int64, float16..float64, ndarray[:DTYPE[:SHAPE]], str_int, "
      "str_float, str_decimal, pil, jpeg, png, jpeg_array, list[pil|jpeg|png], pkl, json)"));
}

absl::Status DecodeNdarrayTokens(const MdsEncoding& encoding, absl::string_view value,
                                 std::vector<int32_t>* out) {
  out->clear();
  size_t pos = 0;
  MdsDtype dtype;
  if (encoding.dtype) {
    dtype = *encoding.dtype;
  } else {
    if (value.empty()) return absl::DataLossError("ndarray value is empty (no dtype byte)");
    const uint8_t code = static_cast<uint8_t>(value[pos++]);
    const DtypeRow* found = nullptr;
    for (const DtypeRow& row : kDtypes) {
      if (row.code == code) found = &row;
    }
    if (found == nullptr) {
      return absl::DataLossError(absl::StrCat("ndarray dtype byte ", code, " is not a dtype"));
    }
    dtype = found->dtype;
  }
  if (!MdsDtypeIsInteger(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ndarray of dtype ", MdsDtypeName(dtype), " is not token ids (an integer dtype is)"));
  }
  const size_t item = MdsDtypeBytes(dtype);
  // At most value.size() elements can fit; the 128-bit product of that and one more
  // 64-bit dim cannot overflow.
  unsigned __int128 count = 1;
  if (encoding.shape) {
    for (uint64_t d : *encoding.shape) count *= d;  // bounded at parse
  } else {
    if (pos >= value.size()) return absl::DataLossError("ndarray value ends before its shape");
    const uint8_t byte = static_cast<uint8_t>(value[pos++]);
    const size_t ndim = byte >> 2;
    const size_t dim_bytes = size_t{1} << (byte & 3);
    if (ndim * dim_bytes > value.size() - pos) {
      return absl::DataLossError(absl::StrCat("ndarray shape of ", ndim, " dims of ", dim_bytes,
                                              " bytes runs past the value's ",
                                              value.size(), " bytes"));
    }
    for (size_t i = 0; i < ndim; ++i, pos += dim_bytes) {
      const uint64_t d = LoadUnsigned(value.data() + pos, dim_bytes);
      count *= d;
      if (count > value.size()) {
        return absl::DataLossError(absl::StrCat("ndarray shape dimension ", i, " = ", d,
                                                " needs more elements than the value holds"));
      }
    }
  }
  const size_t data_bytes = value.size() - pos;
  if (count > data_bytes / item || count * item != data_bytes) {
    return absl::DataLossError(absl::StrCat("ndarray of ", static_cast<uint64_t>(count), " ",
                                            MdsDtypeName(dtype),
                                            " elements has ", data_bytes,
                                            " element bytes (expected ",
                                            static_cast<uint64_t>(count), " x ", item,
                                            ")"));
  }
  out->resize(static_cast<size_t>(count));
  const char* p = value.data() + pos;
  const bool is_signed = dtype == MdsDtype::kInt8 || dtype == MdsDtype::kInt16 ||
                         dtype == MdsDtype::kInt32 || dtype == MdsDtype::kInt64;
  constexpr int64_t kMax = std::numeric_limits<int32_t>::max();
  for (size_t i = 0; i < out->size(); ++i, p += item) {
    if (is_signed) {
      const int64_t v = LoadSigned(p, item);
      if (v < 0 || v > kMax) {
        return absl::InvalidArgumentError(absl::StrCat(
            "token id ", v, " at element ", i, " is outside [0, 2^31)"));
      }
      (*out)[i] = static_cast<int32_t>(v);
    } else {
      const uint64_t v = LoadUnsigned(p, item);
      if (v > static_cast<uint64_t>(kMax)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "token id ", v, " at element ", i, " is outside [0, 2^31)"));
      }
      (*out)[i] = static_cast<int32_t>(v);
    }
  }
  return absl::OkStatus();
}

}  // namespace zephon::pipeline::mds
