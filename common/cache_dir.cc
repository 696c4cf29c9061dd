#include "common/cache_dir.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

namespace zephon {

std::string DefaultCacheDir() {
  namespace fs = std::filesystem;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x != nullptr && *x != '\0') {
    return (fs::path(x) / "zephon").string();
  }
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    return (fs::path(home) / ".cache" / "zephon").string();
  }
  return "/tmp/zephon-" + std::to_string(getuid()) + "/cache";
}

}  // namespace zephon
