// ZEPHON_SIMDJSON_KERNEL as the process starts with it. The BUILD file runs this binary
// with the variable unset, set to a kernel and set to a name that is none; each run
// checks the case it is in.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "daemon/pipeline/formats/json_kernel.h"
#include "daemon/pipeline/formats/json_scan.h"

namespace zephon::pipeline {
namespace {

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

TEST(JsonKernelEnvTest, TheOverrideIsAppliedBeforeTheFirstScanOrRefused) {
  const std::string value = Env(kJsonKernelEnv);
  ASSERT_TRUE(Env("SIMDJSON_FORCE_IMPLEMENTATION").empty()) << "run without simdjson's own";
  const std::vector<std::string> kernels = SupportedJsonKernels();
  std::vector<int32_t> tokens;
  size_t at = 99;
  // The first scan of the process applies the variable.
  const absl::Status scanned =
      ExtractTokenArray(R"({"input_ids": [7]})", "input_ids", &tokens, &at);
  if (value.empty()) {
    ASSERT_TRUE(scanned.ok()) << scanned;
    EXPECT_EQ(JsonKernelName(), kernels.front()) << "simdjson picks the best kernel";
  } else if (value == "fallback" || value == "westmere" || value == "haswell") {
    ASSERT_TRUE(scanned.ok()) << scanned;
    EXPECT_EQ(tokens, std::vector<int32_t>{7});
    EXPECT_EQ(JsonKernelName(), value);
  } else {
    EXPECT_EQ(scanned.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(at, 0u);
    EXPECT_EQ(scanned, ApplyJsonKernelOverride()) << "every scan gives the same refusal";
    const std::string message(scanned.message());
    EXPECT_EQ(message.rfind(std::string(kJsonKernelEnv) + "=" + value + ": ", 0), 0u) << message;
    EXPECT_NE(message.find("use one of " + kernels.front()), std::string::npos) << message;
    EXPECT_NE(message.find("or unset it"), std::string::npos) << message;
    EXPECT_EQ(JsonKernelName(), kernels.front()) << "a refused name changes nothing";
  }
}

}  // namespace
}  // namespace zephon::pipeline
