#include "common/paths.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "common/mix.h"

namespace zephon {

std::string DefaultSocketPath() {
  if (const char* s = std::getenv("ZEPHON_SOCKET"); s != nullptr && *s != '\0') return s;
  if (const char* x = std::getenv("XDG_RUNTIME_DIR"); x != nullptr && *x != '\0') {
    return std::string(x) + "/zephon/zephond.sock";
  }
  return "/tmp/zephon-" + std::to_string(getuid()) + "/zephond.sock";
}

std::string DefaultShmPrefix(const std::string& socket_path) {
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%08llx",
                static_cast<unsigned long long>(HashBytes(socket_path) & 0xffffffffULL));
  return "zephon." + std::to_string(getuid()) + "." + hash;
}

std::string LockPathFor(const std::string& socket_path) { return socket_path + ".lock"; }

}  // namespace zephon
