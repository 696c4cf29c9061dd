// UTF-8 encoding of a code point, for the text scanners (JSON lines, S3 XML).
// Pure function; thread-safe.
#ifndef ZEPHON_COMMON_UTF8_H_
#define ZEPHON_COMMON_UTF8_H_

#include <cstdint>
#include <string>

namespace zephon {

// Appends `cp` (REQUIRES: cp <= 0x10FFFF) to `out` as UTF-8.
inline void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace zephon

#endif  // ZEPHON_COMMON_UTF8_H_
