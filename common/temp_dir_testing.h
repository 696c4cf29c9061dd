// Test scratch directories: one helper for every C++ test instead of a copy per file.
//
// Thread-safety: the functions are thread-safe (each mkdtemp makes its own directory);
// ShortTempDir is single-owner.
#ifndef ZEPHON_COMMON_TEMP_DIR_TESTING_H_
#define ZEPHON_COMMON_TEMP_DIR_TESTING_H_

#include <cstddef>
#include <string>
#include <utility>

namespace zephon::testing {

// A fresh, empty, uniquely named directory under $TEST_TMPDIR (Bazel's per-test scratch
// space; /tmp outside Bazel), its name starting with `tag`. Throws std::runtime_error
// (failing the test) when it cannot be created. Bazel removes it with the sandbox.
std::string MakeTempDir(const std::string& tag);

// A fresh, empty directory "/tmp/zephon-<tag>-XXXXXX", removed with everything in it on
// destruction. For Unix sockets: sun_path holds 107 characters and $TEST_TMPDIR can be
// longer than that, while this path leaves at least 60 for the socket's file name.
// Empty (path() == "") once moved from.
class ShortTempDir {
 public:
  ShortTempDir(ShortTempDir&& other) noexcept;
  ShortTempDir& operator=(ShortTempDir&& other) noexcept;
  ShortTempDir(const ShortTempDir&) = delete;
  ShortTempDir& operator=(const ShortTempDir&) = delete;
  ~ShortTempDir();

  const std::string& path() const { return path_; }

 private:
  friend ShortTempDir MakeShortTempDir(const std::string& tag);
  explicit ShortTempDir(std::string path) : path_(std::move(path)) {}
  void Remove();
  std::string path_;
};

// Makes a ShortTempDir. Throws std::invalid_argument when `tag` is longer than
// kMaxShortTempDirTag or holds a '/', and std::runtime_error (naming the template and
// errno's text) when mkdtemp fails; either fails the test.
inline constexpr size_t kMaxShortTempDirTag = 24;
ShortTempDir MakeShortTempDir(const std::string& tag);

}  // namespace zephon::testing

#endif  // ZEPHON_COMMON_TEMP_DIR_TESTING_H_
