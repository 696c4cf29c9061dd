// Fuzz target: the S3 XML readers (daemon/storage/s3_xml.cc), which parse response
// bodies from an object store (or anything answering on its address).
//
// Input: one response body, given to ParseListObjectsV2, ParseS3Error, XmlElementText
// and XmlUnescape. Invariants beyond "no crash, no UB":
//   * a refused listing is INVALID_ARGUMENT with a message; an accepted one has only
//     non-empty keys and common prefixes;
//   * XmlUnescape never grows its input (every entity is at least as long as the UTF-8
//     it decodes to), and it inverts escaping: XmlUnescape(Escape(s)) == s for the body
//     itself, where Escape replaces & < > " ' with their entities.
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/storage/s3_xml.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

std::string Escape(absl::string_view text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace zephon::storage;
  const absl::string_view xml(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<ListPage> page = ParseListObjectsV2(xml);
  if (!page.ok()) {
    FUZZ_CHECK(page.status().code() == absl::StatusCode::kInvalidArgument,
               page.status().ToString());
    FUZZ_CHECK(!page.status().message().empty(), "empty error message");
  } else {
    for (const ObjectInfo& object : page->objects) FUZZ_CHECK(!object.key.empty(), "empty key");
    for (const std::string& prefix : page->common_prefixes) {
      FUZZ_CHECK(!prefix.empty(), "empty common prefix");
    }
  }
  ParseS3Error(xml);
  bool found = false;
  const std::string key = XmlElementText(xml, "Key", &found);
  FUZZ_CHECK(found || key.empty(), "text returned for a missing element");

  const std::string unescaped = XmlUnescape(xml);
  FUZZ_CHECK(unescaped.size() <= xml.size(), "XmlUnescape grew its input");
  FUZZ_CHECK(XmlUnescape(Escape(xml)) == xml, "XmlUnescape does not invert escaping");
  return 0;
}
