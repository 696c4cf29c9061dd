// The documented 64-bit mixer Zephon derives every seed and hash from.
//
// Mix64 is the splitmix64 finalizer (Stafford variant 13). Seeds are combined with
// Combine(a, b) = Mix64(a ^ Mix64(b + kGolden)). These formulas are part of the
// determinism contract: changing them moves golden sample ids and requires bumping
// PipelineSpec.format_version. Thread-safe (pure functions).
#ifndef ZEPHON_COMMON_MIX_H_
#define ZEPHON_COMMON_MIX_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zephon {

inline constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;

constexpr uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

constexpr uint64_t Combine(uint64_t a, uint64_t b) { return Mix64(a ^ Mix64(b + kGolden)); }

// 64-bit FNV-1a over bytes, finalized with Mix64: the spec-hash and fingerprint hash.
inline uint64_t HashBytes(std::string_view bytes, uint64_t seed = 0) {
  uint64_t h = 0xCBF29CE484222325ULL ^ Mix64(seed);
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001B3ULL;
  }
  return Mix64(h);
}

}  // namespace zephon

#endif  // ZEPHON_COMMON_MIX_H_
