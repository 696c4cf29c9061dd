#include "common/temp_dir_testing.h"

#include <stdlib.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>

namespace zephon::testing {

std::string MakeTempDir(const std::string& tag) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/" + tag + "_XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("cannot create a temp dir from " + tmpl + ": " +
                             std::strerror(errno));
  }
  return tmpl;
}

ShortTempDir MakeShortTempDir(const std::string& tag) {
  if (tag.size() > kMaxShortTempDirTag || tag.find('/') != std::string::npos) {
    throw std::invalid_argument("MakeShortTempDir: tag '" + tag + "' must be at most " +
                                std::to_string(kMaxShortTempDirTag) +
                                " characters without '/' (the path must fit a socket's "
                                "sun_path); use a shorter tag");
  }
  std::string tmpl = "/tmp/zephon-" + tag + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("cannot create a temp dir from " + tmpl + ": " +
                             std::strerror(errno));
  }
  return ShortTempDir(std::move(tmpl));
}

ShortTempDir::ShortTempDir(ShortTempDir&& other) noexcept
    : path_(std::exchange(other.path_, std::string())) {}

ShortTempDir& ShortTempDir::operator=(ShortTempDir&& other) noexcept {
  if (this != &other) {
    Remove();
    path_ = std::exchange(other.path_, std::string());
  }
  return *this;
}

ShortTempDir::~ShortTempDir() { Remove(); }

void ShortTempDir::Remove() {
  if (path_.empty()) return;
  std::error_code ignored;  // a test that already removed it, or a busy mount: not an error
  std::filesystem::remove_all(path_, ignored);
  path_.clear();
}

}  // namespace zephon::testing
