// SHA-256 and HMAC-SHA256 (OpenSSL), for every part of Zephon that hashes or signs: S3
// request signing (SigV4), shard cache entry names, signed peer calls.
//
// Thread-safety: pure functions.
#ifndef ZEPHON_COMMON_DIGEST_H_
#define ZEPHON_COMMON_DIGEST_H_

#include <string>

#include "absl/strings/string_view.h"

namespace zephon {

// Raw 32-byte SHA-256 of `bytes`.
std::string Sha256(absl::string_view bytes);

// Lowercase hex SHA-256 of `bytes` (64 characters).
std::string Sha256Hex(absl::string_view bytes);

// Raw 32-byte HMAC-SHA256 of `data` under `key`.
std::string HmacSha256(absl::string_view key, absl::string_view data);

}  // namespace zephon

#endif  // ZEPHON_COMMON_DIGEST_H_
