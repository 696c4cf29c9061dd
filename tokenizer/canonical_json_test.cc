#include "tokenizer/canonical_json.h"

#include <gtest/gtest.h>

namespace zephon::tokenizer {
namespace {

std::string Canonical(const std::string& json) {
  simdjson::dom::parser parser;
  simdjson::dom::element root;
  EXPECT_FALSE(parser.parse(json).get(root));
  std::string out;
  AppendCanonicalJson(root, &out);
  return out;
}

TEST(CanonicalJsonTest, SortsKeysAndDropsWhitespace) {
  EXPECT_EQ(Canonical(R"({ "b": [1, 2.5, true, null],
                          "a": {"y": "x", "x": -3} })"),
            R"({"a":{"x":-3,"y":"x"},"b":[1,2.5,true,null]})");
}

TEST(CanonicalJsonTest, EquivalentSpellingsGiveTheSameBytes) {
  EXPECT_EQ(Canonical(R"({"s": "\u00e9\n\"", "n": 1.0})"),
            Canonical("{\"n\":1.0,\"s\":\"\xc3\xa9\\n\\\"\"}"));
  EXPECT_EQ(Canonical(R"({"s": "tab\there"})"), R"({"s":"tab\u0009here"})");
}

}  // namespace
}  // namespace zephon::tokenizer
