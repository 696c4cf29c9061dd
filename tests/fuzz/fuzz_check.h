// FUZZ_CHECK: the invariant check of the fuzz targets (tests/fuzz/*_fuzzer.cc).
//
// A violated invariant prints what failed and aborts, which libFuzzer reports as a crash
// (and saves the input), and which fails the corpus regression tests in `make test`.
// Fuzz targets must not use gtest or CHECK from a logging library: they are built both
// by Bazel (gcc, corpus replay) and by tests/fuzz/build.sh (clang, libFuzzer).
#ifndef ZEPHON_TESTS_FUZZ_FUZZ_CHECK_H_
#define ZEPHON_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#define FUZZ_CHECK(cond, detail)                                                  \
  do {                                                                            \
    if (!(cond)) {                                                                \
      std::fprintf(stderr, "%s:%d: fuzz invariant violated: %s: %s\n", __FILE__,  \
                   __LINE__, #cond, std::string(detail).c_str());                 \
      std::abort();                                                               \
    }                                                                             \
  } while (0)

#endif  // ZEPHON_TESTS_FUZZ_FUZZ_CHECK_H_
