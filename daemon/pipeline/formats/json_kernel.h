// Which simdjson kernel parses JSON in this process, and the ZEPHON_SIMDJSON_KERNEL override.
//
// With Debian's libsimdjson (3.0.1) an On-Demand parse has two halves. Stage 1 (finding the
// structural characters, validating UTF-8) and string unescaping run inside libsimdjson.so,
// in the kernel simdjson picks at run time for this CPU: icelake (AVX-512), haswell (AVX2),
// westmere (SSE4.2) or fallback (portable). The value walk (navigation, numbers, literals)
// is inlined from the header and compiled for the header's "builtin" kernel, fallback
// without -march flags. Only the first half is worth dispatching: it is where the kernels
// differ 2-5x, while the walk measured the same compiled for fallback or haswell
// (docs/benchmarks.md). Compiling the walk per kernel would need the amalgamated header
// included twice, since 3.0.1 instantiates On-Demand for the builtin kernel only.
//
// A simdjson parser (On-Demand or DOM) takes the process's kernel when it first parses and
// keeps it. ZEPHON_SIMDJSON_KERNEL=<name> makes <name> the process's kernel (to test the
// portable path on any machine, or to compare kernels); unset or empty, it is simdjson's
// choice, which honours simdjson's own SIMDJSON_FORCE_IMPLEMENTATION.
//
// Thread-safety: every function may be called from any thread.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_JSON_KERNEL_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_JSON_KERNEL_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace zephon::pipeline {

inline constexpr char kJsonKernelEnv[] = "ZEPHON_SIMDJSON_KERNEL";

// Applies ZEPHON_SIMDJSON_KERNEL the first time it is called in the process and returns
// that outcome on every call: OK when the variable is unset, empty or names a kernel this
// CPU runs; else INVALID_ARGUMENT naming the variable, the value and the choices. Parsers
// call it before their first parse; zephond at start, to refuse a bad value.
const absl::Status& ApplyJsonKernelOverride();

// Makes `name` the kernel of every simdjson parser that has not parsed yet.
// INVALID_ARGUMENT naming the kernels this CPU runs when `name` is unknown or not one of
// them (the process's kernel is then unchanged).
absl::Status UseJsonKernel(std::string_view name);

// The kernel a parser created now parses with: "icelake", "haswell", "westmere" or
// "fallback" on x86-64.
std::string JsonKernelName();

// The kernels this CPU runs, best first (simdjson's order); "fallback" is always one.
std::vector<std::string> SupportedJsonKernels();

// The kernel the On-Demand value walk is compiled for (simdjson's builtin kernel):
// "fallback" with Debian's header and this build's flags.
std::string_view JsonWalkKernelName();

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_JSON_KERNEL_H_
