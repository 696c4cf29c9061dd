// Token element types of on-disk token arrays and their decoding to int32.
//
// All token arrays are little-endian. Decoding converts each element to int32 with a
// plain C++ conversion: int64 / uint32 ids above INT32_MAX wrap (vocabularies are
// assumed < 2^31). Thread-safe: pure functions, and DecodeTokensAt reads a (thread-safe)
// ShardFile through a per-thread buffer.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_TOKENS_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_TOKENS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/shard_file.h"

namespace zephon::pipeline {

enum class TokenType { kUint8, kInt8, kInt16, kUint16, kInt32, kUint32, kInt64 };

// Bytes per element.
size_t TokenWidth(TokenType type);
// "uint16" etc.
std::string TokenTypeName(TokenType type);
// Parses "uint16" / "uint32" (the flat-file dtypes). INVALID_ARGUMENT otherwise.
absl::StatusOr<TokenType> ParseFlatDtype(const std::string& name);

// Decodes `count` little-endian tokens of `type` at `data` (any alignment) into
// out[0..count).
// REQUIRES: data points at count * TokenWidth(type) readable bytes.
void DecodeTokens(const char* data, TokenType type, uint64_t count, int32_t* out);

// Decodes the `count` tokens of `type` that start at byte `byte_offset` of `file` into
// out[0..count): the one token read of the shard readers (flat, Megatron .bin).
// Resident (in-memory) files are decoded in place, with no copy; others (local files,
// read with pread, and remote ones) are read (ShardFile::View) into a thread-local
// scratch buffer, which is released afterwards when it grew past 4 MiB so one huge
// sample does not stay pinned per thread.
// Errors are ShardFile::View's: OUT_OF_RANGE naming the file when the range passes its
// end, or the storage's read error (naming the URL).
absl::Status DecodeTokensAt(const ShardFile& file, uint64_t byte_offset, TokenType type,
                            uint64_t count, int32_t* out);

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_TOKENS_H_
