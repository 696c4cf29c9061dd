// Test helpers for shm/: unique ring names per test and process, and reader fds.
#ifndef ZEPHON_SHM_TEST_UTIL_H_
#define ZEPHON_SHM_TEST_UTIL_H_

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <string>

#include "shm/ring_writer.h"
#include "shm/segment.h"

namespace zephon::shm::testing {

// "/zephon-test.<pid>.<tag>.<n>": a unique POSIX shm name (legacy segments).
inline std::string UniqueShmName(const std::string& tag) {
  static std::atomic<int> counter{0};
  return "/zephon-test." + std::to_string(getpid()) + "." + tag + "." +
         std::to_string(counter.fetch_add(1));
}

// "zephon-test.<pid>.<tag>.<n>": a unique ring (memfd) name.
inline std::string UniqueRingName(const std::string& tag) { return UniqueShmName(tag).substr(1); }

// The fds a reader of `writer` gets; aborts the test binary if the kernel refuses.
inline RingFds FdsOf(const RingWriter& writer) {
  absl::StatusOr<RingFds> fds = writer.ReaderFds();
  if (!fds.ok()) {
    std::cerr << "ReaderFds: " << fds.status() << "\n";
    std::abort();
  }
  return *std::move(fds);
}

}  // namespace zephon::shm::testing

#endif  // ZEPHON_SHM_TEST_UTIL_H_
