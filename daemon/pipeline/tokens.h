// Token element types of on-disk token arrays and their decoding to int32.
//
// All token arrays are little-endian. Decoding converts each element to int32 with a
// plain C++ conversion: int64 / uint32 ids above INT32_MAX wrap (vocabularies are
// assumed < 2^31). Pure functions; thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_TOKENS_H_
#define ZEPHON_DAEMON_PIPELINE_TOKENS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zephon::pipeline {

enum class TokenType { kUint8, kInt8, kInt16, kUint16, kInt32, kUint32, kInt64 };

// Bytes per element.
size_t TokenWidth(TokenType type);
// "uint16" etc.
std::string TokenTypeName(TokenType type);
// Parses "uint16" / "uint32" (the flat-file dtypes). INVALID_ARGUMENT otherwise.
absl::StatusOr<TokenType> ParseFlatDtype(const std::string& name);

// Appends `count` elements of `type` starting at `data` to `out` as int32.
// REQUIRES: data points at count * TokenWidth(type) readable bytes.
// Decodes `count` little-endian tokens of `type` at `data` (any alignment) into out[0..count).
void DecodeTokens(const char* data, TokenType type, uint64_t count, int32_t* out);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_TOKENS_H_
