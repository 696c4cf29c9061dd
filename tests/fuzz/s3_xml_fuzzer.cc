// Fuzz target: the S3 XML readers (daemon/storage/s3_xml.cc), which parse response
// bodies from an object store (or anything answering on its address).
//
// Input: one response body, given to ParseListObjectsV2, ParseS3Error, XmlElementText
// and XmlUnescape. Invariants beyond "no crash, no UB":
//   * a refused listing is INVALID_ARGUMENT with a message; an accepted one has only
//     non-empty keys and common prefixes;
//   * XmlUnescape never grows its input (every entity is at least as long as the UTF-8
//     it decodes to), and it inverts escaping: XmlUnescape(Escape(s)) == s for the body
//     itself, where Escape replaces & < > " ' with their entities;
//   * character references decode only to XML characters: when the body is valid UTF-8
//     made of XML 1.0 characters (#x9 #xA #xD, #x20-#xD7FF, #xE000-#xFFFD,
//     #x10000-#x10FFFF), so is its unescaped text (no NUL, no lone surrogates in keys).
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

// True when `text` is valid UTF-8 (shortest forms, no surrogates) of XML 1.0 Chars.
bool IsXmlText(absl::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    const int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    if (len == 0 || i + len > text.size()) return false;
    uint32_t cp = len == 1 ? b : b & (0x7F >> len);
    for (int k = 1; k < len; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len]) return false;  // overlong
    const bool xml_char = cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
                          (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
    if (!xml_char) return false;
    i += len;
  }
  return true;
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
  FUZZ_CHECK(!IsXmlText(xml) || IsXmlText(unescaped),
             "a character reference decoded to a byte sequence that is not XML text");
  return 0;
}
