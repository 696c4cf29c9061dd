// Little-endian integers in byte strings, for zephond's own file formats (checkpoint
// files, audit logs, merged steps), which are little-endian on every host.
//
// Thread-safety: pure functions.
#ifndef ZEPHON_COMMON_LITTLE_ENDIAN_H_
#define ZEPHON_COMMON_LITTLE_ENDIAN_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace zephon {

// The low `bytes` bytes of v, least significant first, written at p.
inline void StoreLittleEndian(char* p, uint64_t v, size_t bytes) {
  for (size_t i = 0; i < bytes; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// The same, appended to *out.
inline void AppendLittleEndian(uint64_t v, size_t bytes, std::string* out) {
  for (size_t i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// The `bytes`-byte little-endian integer at p.
inline uint64_t LoadLittleEndian(const char* p, size_t bytes) {
  uint64_t v = 0;
  for (size_t i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

}  // namespace zephon

#endif  // ZEPHON_COMMON_LITTLE_ENDIAN_H_
