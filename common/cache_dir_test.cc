#include "common/cache_dir.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace zephon {
namespace {

// Restores one environment variable when it goes out of scope.
class SavedEnv {
 public:
  explicit SavedEnv(const char* name) : name_(name) {
    const char* v = std::getenv(name);
    had_ = v != nullptr;
    if (had_) value_ = v;
  }
  ~SavedEnv() {
    if (had_) {
      setenv(name_, value_.c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string value_;
};

TEST(DefaultCacheDirTest, FollowsXdgThenHomeThenTmp) {
  SavedEnv xdg("XDG_CACHE_HOME"), home("HOME");
  setenv("XDG_CACHE_HOME", "/x/cache", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(DefaultCacheDir(), "/x/cache/zephon");
  setenv("XDG_CACHE_HOME", "", 1);  // Empty counts as unset.
  EXPECT_EQ(DefaultCacheDir(), "/home/u/.cache/zephon");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(DefaultCacheDir(), "/home/u/.cache/zephon");
  unsetenv("HOME");
  EXPECT_EQ(DefaultCacheDir(), "/tmp/zephon-" + std::to_string(getuid()) + "/cache");
}

}  // namespace
}  // namespace zephon
