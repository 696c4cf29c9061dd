// Test helpers: the shards of testdata/ (written by tests/mds/write_testdata.py, which
// follows Streaming's writer) and small byte edits on them.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_TEST_UTIL_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_TEST_UTIL_H_

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/string_view.h"

namespace zephon::pipeline::mds::testing {

inline constexpr char kTestdata[] = "daemon/pipeline/formats/mds/testdata/";

// The bytes of testdata/<name>; empty when missing (the test then fails on it).
inline std::string ReadTestdata(const std::string& name) {
  std::ifstream in(std::string(kTestdata) + name, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

inline bool Has(absl::string_view message, absl::string_view part) {
  return message.find(part) != absl::string_view::npos;
}

inline void PutU32(std::string* bytes, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) (*bytes)[at + i] = static_cast<char>(v >> (8 * i));
}

inline uint32_t GetU32(const std::string& bytes, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[at + i])) << (8 * i);
  return v;
}

}  // namespace zephon::pipeline::mds::testing

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_MDS_MDS_TEST_UTIL_H_
