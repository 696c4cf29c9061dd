#include "daemon/pipeline/formats/json_kernel.h"

#include <simdjson.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace zephon::pipeline {

namespace {

absl::Status Check() {
  const char* value = std::getenv(kJsonKernelEnv);
  if (value != nullptr && *value != '\0') {
    if (absl::Status used = UseJsonKernel(value); !used.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(kJsonKernelEnv, "=", value, ": ", used.message(), ", or unset it"));
    }
    return absl::OkStatus();
  }
  // simdjson's own override: an unknown name leaves its "unsupported" kernel, which fails
  // every parse (and claims to run everywhere, so the name is what tells).
  const simdjson::implementation* active = simdjson::get_active_implementation();
  if (active->name() == "unsupported" || !active->supported_by_runtime_system()) {
    const char* forced = std::getenv("SIMDJSON_FORCE_IMPLEMENTATION");
    return absl::InvalidArgumentError(absl::StrCat(
        "SIMDJSON_FORCE_IMPLEMENTATION=", forced == nullptr ? "" : forced,
        " leaves simdjson no kernel to parse JSON with; use one of ",
        absl::StrJoin(SupportedJsonKernels(), ", "), ", or unset it"));
  }
  return absl::OkStatus();
}

}  // namespace

const absl::Status& ApplyJsonKernelOverride() {
  // A function-local static: initialized once, by the first caller, thread-safely.
  static const absl::Status* const status = new absl::Status(Check());
  return *status;
}

absl::Status UseJsonKernel(std::string_view name) {
  const simdjson::implementation* kernel =
      simdjson::get_available_implementations()[std::string(name)];
  if (kernel == nullptr || !kernel->supported_by_runtime_system()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", std::string(name), "\" is not a simdjson kernel this CPU runs; use one of ",
        absl::StrJoin(SupportedJsonKernels(), ", ")));
  }
  simdjson::get_active_implementation() = kernel;
  return absl::OkStatus();
}

std::string JsonKernelName() { return simdjson::get_active_implementation()->name(); }

std::vector<std::string> SupportedJsonKernels() {
  std::vector<std::string> names;
  for (const simdjson::implementation* kernel : simdjson::get_available_implementations()) {
    if (kernel->supported_by_runtime_system()) names.push_back(kernel->name());
  }
  return names;
}

std::string_view JsonWalkKernelName() {
  return SIMDJSON_STRINGIFY(SIMDJSON_BUILTIN_IMPLEMENTATION);
}

}  // namespace zephon::pipeline
