// Test scratch directories: one helper for every C++ test instead of a copy per file.
#ifndef ZEPHON_COMMON_TEMP_DIR_TESTING_H_
#define ZEPHON_COMMON_TEMP_DIR_TESTING_H_

#include <stdlib.h>

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace zephon::testing {

// A fresh, empty, uniquely named directory under $TEST_TMPDIR (Bazel's per-test scratch
// space; /tmp outside Bazel), its name starting with `tag`. Throws std::runtime_error
// (failing the test) when it cannot be created.
inline std::string MakeTempDir(const std::string& tag) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/" + tag + "_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("cannot create a temp dir from " + tmpl);
  }
  return tmpl;
}

}  // namespace zephon::testing

#endif  // ZEPHON_COMMON_TEMP_DIR_TESTING_H_
