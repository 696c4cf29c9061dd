// Test helpers for shm/: unique shm names per test and process.
#ifndef ZEPHON_SHM_TEST_UTIL_H_
#define ZEPHON_SHM_TEST_UTIL_H_

#include <unistd.h>

#include <atomic>
#include <string>

namespace zephon::shm::testing {

// "/zephon-test.<pid>.<tag>.<n>": unique across concurrent test processes and calls.
inline std::string UniqueShmName(const std::string& tag) {
  static std::atomic<int> counter{0};
  return "/zephon-test." + std::to_string(getpid()) + "." + tag + "." +
         std::to_string(counter.fetch_add(1));
}

}  // namespace zephon::shm::testing

#endif  // ZEPHON_SHM_TEST_UTIL_H_
