#include "common/run_id.h"

#include <string>

#include "gtest/gtest.h"

namespace zephon {
namespace {

TEST(IsValidRunId, AcceptsOnlyTheDocumentedAlphabet) {
  EXPECT_TRUE(IsValidRunId("pretrain-7b_2026.03"));
  EXPECT_TRUE(IsValidRunId(std::string(128, 'a')));
  EXPECT_FALSE(IsValidRunId(""));
  EXPECT_FALSE(IsValidRunId(std::string(129, 'a')));
  EXPECT_FALSE(IsValidRunId("a b"));
  EXPECT_FALSE(IsValidRunId("a/b"));
}

TEST(IsValidRunId, RefusesNamesOfTheDirectoryItselfOrItsParent) {
  EXPECT_FALSE(IsValidRunId("."));
  EXPECT_FALSE(IsValidRunId(".."));
  EXPECT_TRUE(IsValidRunId("..."));
}

}  // namespace
}  // namespace zephon
