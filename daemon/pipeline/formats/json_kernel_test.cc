#include "daemon/pipeline/formats/json_kernel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/pipeline/formats/json_scan.h"

namespace zephon::pipeline {
namespace {

// Puts back the kernel a test found.
class JsonKernelTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(ApplyJsonKernelOverride().ok()); }
  void TearDown() override { ASSERT_TRUE(UseJsonKernel(original_).ok()); }

 private:
  const std::string original_ = JsonKernelName();
};

TEST_F(JsonKernelTest, EachKernelThisCpuRunsCanBeChosen) {
  const std::vector<std::string> kernels = SupportedJsonKernels();
  ASSERT_FALSE(kernels.empty());
  EXPECT_EQ(kernels.back(), "fallback");
  for (const std::string& kernel : kernels) {
    ASSERT_TRUE(UseJsonKernel(kernel).ok()) << kernel;
    EXPECT_EQ(JsonKernelName(), kernel);
  }
  EXPECT_NE(std::find(kernels.begin(), kernels.end(), std::string(JsonWalkKernelName())),
            kernels.end())
      << JsonWalkKernelName();
}

TEST_F(JsonKernelTest, UnknownKernelsAreRefusedNamingTheChoices) {
  ASSERT_TRUE(UseJsonKernel("fallback").ok());
  for (const char* bad : {"avx9", "", "unsupported", "Haswell"}) {
    const absl::Status s = UseJsonKernel(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(absl::StrCat("\"", bad, "\" is not a simdjson kernel")),
              std::string::npos)
        << s;
    EXPECT_NE(s.message().find("use one of "), std::string::npos) << s;
    EXPECT_NE(s.message().find("fallback"), std::string::npos) << s;
    EXPECT_EQ(JsonKernelName(), "fallback") << "a refused name changed the kernel";
  }
}

// What a scan of one line found: tokens, or the error and its offset.
struct Outcome {
  bool ok;
  std::string message;
  size_t offset;
  std::vector<int32_t> tokens;
  bool operator==(const Outcome& o) const {
    return ok == o.ok && message == o.message && offset == o.offset && tokens == o.tokens;
  }
};

std::string RandomValue(std::mt19937_64& rng, int depth) {
  static const std::vector<std::string> kStrings = {
      R"("")", R"("plain text")", R"("a \"quoted\" \\ \/ \b\f\n\r\t")", R"("\u00e9\ud83d\ude00")",
      "\"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80\"",
      R"("a longer string that runs past one 64-byte block of the structural indexer ....")"};
  static const std::vector<std::string> kAtoms = {"0",    "-1.5e-3", "12345678901234567890",
                                                  "1E+2", "true",    "false",
                                                  "null", "1e999",   "-0"};
  switch (std::uniform_int_distribution<int>(0, depth > 3 ? 1 : 3)(rng)) {
    case 0: return kStrings[rng() % kStrings.size()];
    case 1: return kAtoms[rng() % kAtoms.size()];
    case 2: {
      std::string s = "[";
      for (int i = static_cast<int>(rng() % 4); i > 0; --i) {
        s += RandomValue(rng, depth + 1);
        if (i > 1) s += ", ";
      }
      return s + "]";
    }
    default: {
      std::string s = "{";
      for (int i = static_cast<int>(rng() % 4); i > 0; --i) {
        s += absl::StrCat("\"k", i, "\": ", RandomValue(rng, depth + 1));
        if (i > 1) s += ",";
      }
      return s + "}";
    }
  }
}

// Valid lines with other fields around input_ids, then each one damaged a few ways
// (bytes deleted, replaced with JSON's special characters or invalid UTF-8, cut short),
// so both the tokens and every kind of error are compared.
std::vector<std::string> Corpus() {
  std::mt19937_64 rng(20261202);
  // Lines where the fallback kernel's own first error differs from the SIMD kernels'.
  std::vector<std::string> lines = {
      "{\"a\": \"x\\\xc3\xa9\", \"input_ids\": [1]}",
      "{\"k\\\xf0\x9f\x98\x80\": 1, \"input_ids\": [1]}",
      R"({"input_ids": [19"4]})",
      "{\"input_ids\": [1, 2\xff]}",
      "{\"input_ids\": [1, 2], \"a\": [1, \"\x01\"]}",
  };
  for (int n = 0; n < 400; ++n) {
    std::string line = absl::StrCat("{\"text\": ", RandomValue(rng, 3), ", \"input_ids\": [");
    const int tokens = static_cast<int>(rng() % 300);
    for (int i = 0; i < tokens; ++i) {
      absl::StrAppend(&line, i > 0 ? ", " : "", rng() % 2147483648u);
    }
    absl::StrAppend(&line, "], \"meta\": ", RandomValue(rng, 1), "}");
    lines.push_back(line);
  }
  static const std::string kSpecial = "{}[]:,\"\\ \t\x01\xff\xc3-.eE0n";
  const size_t valid = lines.size();
  for (size_t n = 0; n < valid; ++n) {
    for (int damage = 0; damage < 4; ++damage) {
      std::string line = lines[n];
      const size_t at = rng() % line.size();
      switch (damage) {
        case 0: line.erase(at, 1); break;
        case 1: line[at] = kSpecial[rng() % kSpecial.size()]; break;
        case 2: line.insert(at, 1, kSpecial[rng() % kSpecial.size()]); break;
        default: line.resize(at); break;
      }
      lines.push_back(line);
    }
  }
  return lines;
}

std::vector<Outcome> ScanAll(const std::vector<std::string>& lines) {
  std::vector<Outcome> outcomes;
  for (const std::string& line : lines) {
    Outcome o;
    o.offset = 0;
    const absl::Status s = ExtractTokenArray(line, "input_ids", &o.tokens, &o.offset);
    o.ok = s.ok();
    o.message = std::string(s.message());
    if (!o.ok) o.tokens.clear();
    outcomes.push_back(std::move(o));
  }
  return outcomes;
}

TEST_F(JsonKernelTest, EveryKernelFindsTheSameTokensAndTheSameErrors) {
  const std::vector<std::string> kernels = SupportedJsonKernels();
  if (kernels.size() < 2) GTEST_SKIP() << "this CPU runs only the fallback kernel";
  const std::vector<std::string> lines = Corpus();
  ASSERT_TRUE(UseJsonKernel("fallback").ok());
  const std::vector<Outcome> reference = ScanAll(lines);
  const size_t good = std::count_if(reference.begin(), reference.end(),
                                    [](const Outcome& o) { return o.ok; });
  // Enough of both for the comparison to mean something.
  ASSERT_GE(good, 400u);
  ASSERT_GE(reference.size() - good, 800u);
  for (const std::string& kernel : kernels) {
    ASSERT_TRUE(UseJsonKernel(kernel).ok());
    const std::vector<Outcome> outcomes = ScanAll(lines);
    for (size_t i = 0; i < lines.size(); ++i) {
      ASSERT_TRUE(outcomes[i] == reference[i])
          << kernel << " vs fallback on line " << i << ": " << lines[i] << "\n  " << kernel
          << ": " << (outcomes[i].ok ? "ok" : outcomes[i].message) << " at "
          << outcomes[i].offset << "\n  fallback: "
          << (reference[i].ok ? "ok" : reference[i].message) << " at " << reference[i].offset;
    }
  }
}

TEST_F(JsonKernelTest, SwitchingKernelsLeavesAScannerInUseWorking) {
  // simdjson binds a parser to the kernel at its first parse; switching afterwards
  // must neither break a scanner in use nor change what it finds.
  const std::vector<std::string> kernels = SupportedJsonKernels();
  TokenArrayScanner scanner("input_ids");
  std::vector<int32_t> tokens;
  size_t at = 0;
  for (int round = 0; round < 3; ++round) {
    for (const std::string& kernel : kernels) {
      ASSERT_TRUE(UseJsonKernel(kernel).ok());
      tokens.clear();
      ASSERT_TRUE(scanner.Scan(R"({"input_ids": [1, 2, 3]})", 0, &tokens, &at).ok());
      EXPECT_EQ(tokens, (std::vector<int32_t>{1, 2, 3}));
      EXPECT_FALSE(scanner.Scan(R"({"input_ids": [1, 2,]})", 0, &tokens, &at).ok());
    }
  }
}

}  // namespace
}  // namespace zephon::pipeline
