// Unicode helpers for the tokenizer: UTF-8 decoding, the character classes the known
// pre-tokenizer regexes use (\p{L}, \p{N}, \s), and NFC/NFKC normalization. Classes and
// normalization come from ICU (Debian libicu-dev), never from tables written here, so they
// follow one Unicode version.
//
// Thread-safety: every function is thread-safe (ICU's normalizer instances are immutable).
#ifndef ZEPHON_TOKENIZER_UNICODE_H_
#define ZEPHON_TOKENIZER_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace zephon::tokenizer {

// Debian's Abseil keeps its own absl::string_view; this bridges std::string_view to it
// (StrCat, heterogeneous hash-map lookups).
inline absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Decodes the code point at s[i]. REQUIRES: i < s.size() and s is valid UTF-8.
// Sets *len to its byte length.
inline char32_t DecodeUtf8(std::string_view s, size_t i, int* len) {
  const auto c = static_cast<unsigned char>(s[i]);
  if (c < 0x80) { *len = 1; return c; }
  if (c < 0xE0) {
    *len = 2;
    return ((c & 0x1F) << 6) | (static_cast<unsigned char>(s[i + 1]) & 0x3F);
  }
  if (c < 0xF0) {
    *len = 3;
    return ((c & 0x0F) << 12) | ((static_cast<unsigned char>(s[i + 1]) & 0x3F) << 6) |
           (static_cast<unsigned char>(s[i + 2]) & 0x3F);
  }
  *len = 4;
  return ((c & 0x07) << 18) | ((static_cast<unsigned char>(s[i + 1]) & 0x3F) << 12) |
         ((static_cast<unsigned char>(s[i + 2]) & 0x3F) << 6) |
         (static_cast<unsigned char>(s[i + 3]) & 0x3F);
}

// Character classes of the known Split regexes. Bits, so one lookup answers several.
enum CharClass : uint8_t {
  kLetter = 1,     // \p{L}
  kNumber = 2,     // \p{N}
  kSpace = 4,      // \s (Unicode White_Space, as Oniguruma and Rust regex use it)
  kMark = 8,       // \p{M}
  kUpperish = 16,  // \p{Lu} or \p{Lt}  (o200k's cased classes)
  kLower = 32,     // \p{Ll}
  kWordish = 64,   // \w: alphanumeric, mark or connector punctuation (single_word tokens)
};

// The CharClass bits of cp. ASCII is answered from a table built once from ICU.
uint8_t ClassOf(char32_t cp);

// True when s is valid UTF-8 (no overlongs, surrogates or code points above U+10FFFF).
bool IsValidUtf8(std::string_view s);

// Replaces each maximal invalid subsequence with U+FFFD, as Python's
// bytes.decode("utf-8", errors="replace") does. Valid input is returned unchanged.
std::string ReplaceInvalidUtf8(std::string_view s);

enum class NormalForm { kNfc, kNfkc };

// True when cp never interacts with the characters before it under the form: a text cut
// right before cp normalizes as its two parts do (ICU Normalizer2::hasBoundaryBefore).
bool HasNormalizationBoundaryBefore(NormalForm form, char32_t cp);

// Normalizes valid UTF-8 s to the form; appends to *out. ASCII input is copied as is.
// Errors: INTERNAL if ICU fails (it only fails on allocation).
absl::Status Normalize(NormalForm form, std::string_view s, std::string* out);

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_UNICODE_H_
