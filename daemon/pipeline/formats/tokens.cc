#include "daemon/pipeline/formats/tokens.h"

#include <cstring>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zephon::pipeline {
namespace {

template <typename T>
void DecodeAs(const char* data, uint64_t count, int32_t* dst) {
  for (uint64_t i = 0; i < count; ++i) {
    T v;
    std::memcpy(&v, data + i * sizeof(T), sizeof(T));  // Unaligned-safe load.
    dst[i] = static_cast<int32_t>(v);
  }
}

}  // namespace

size_t TokenWidth(TokenType type) {
  switch (type) {
    case TokenType::kUint8:
    case TokenType::kInt8:
      return 1;
    case TokenType::kInt16:
    case TokenType::kUint16:
      return 2;
    case TokenType::kInt32:
    case TokenType::kUint32:
      return 4;
    case TokenType::kInt64:
      return 8;
  }
  return 1;
}

std::string TokenTypeName(TokenType type) {
  switch (type) {
    case TokenType::kUint8: return "uint8";
    case TokenType::kInt8: return "int8";
    case TokenType::kInt16: return "int16";
    case TokenType::kUint16: return "uint16";
    case TokenType::kInt32: return "int32";
    case TokenType::kUint32: return "uint32";
    case TokenType::kInt64: return "int64";
  }
  return "?";
}

absl::StatusOr<TokenType> ParseFlatDtype(const std::string& name) {
  if (name == "uint16") return TokenType::kUint16;
  if (name == "uint32") return TokenType::kUint32;
  return absl::InvalidArgumentError(
      absl::StrCat("dataset dtype '", name, "' is not supported: use uint16 or uint32"));
}

void DecodeTokens(const char* data, TokenType type, uint64_t count, int32_t* out) {
  switch (type) {
    case TokenType::kUint8: return DecodeAs<uint8_t>(data, count, out);
    case TokenType::kInt8: return DecodeAs<int8_t>(data, count, out);
    case TokenType::kInt16: return DecodeAs<int16_t>(data, count, out);
    case TokenType::kUint16: return DecodeAs<uint16_t>(data, count, out);
    case TokenType::kInt32: return DecodeAs<int32_t>(data, count, out);
    case TokenType::kUint32: return DecodeAs<uint32_t>(data, count, out);
    case TokenType::kInt64: return DecodeAs<int64_t>(data, count, out);
  }
}

absl::Status DecodeTokensAt(const ShardFile& file, uint64_t byte_offset, TokenType type,
                            uint64_t count, int32_t* out) {
  constexpr size_t kMaxKeptScratch = size_t{4} << 20;
  thread_local std::string scratch;  // reused: this runs for every sample piece
  const uint64_t width = TokenWidth(type);
  if (count > UINT64_MAX / width) {
    return absl::OutOfRangeError(absl::StrCat("reading ", count, " tokens of ", width,
                                              " bytes from ", file.path(), " overflows"));
  }
  // Resident files: a view into data() (scratch untouched); others: read into scratch.
  absl::StatusOr<std::string_view> bytes = file.View(byte_offset, count * width, &scratch);
  if (bytes.ok()) DecodeTokens(bytes->data(), type, count, out);
  // On every path, failed reads included: a huge sample must not pin its buffer.
  if (scratch.capacity() > kMaxKeptScratch) std::string().swap(scratch);
  return bytes.status();
}

}  // namespace zephon::pipeline
