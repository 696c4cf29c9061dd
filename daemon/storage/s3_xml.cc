#include "daemon/storage/s3_xml.h"

#include <cstdint>
#include <cstdlib>
#include <sstream>

#include <pugixml.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/utf8.h"
#include "absl/time/time.h"

namespace zephon::storage {
namespace {

// Decodes the entity body `name` (between '&' and ';'); false if unknown or malformed.
bool DecodeEntity(absl::string_view name, std::string* out) {
  if (name == "amp") return out->push_back('&'), true;
  if (name == "lt") return out->push_back('<'), true;
  if (name == "gt") return out->push_back('>'), true;
  if (name == "quot") return out->push_back('"'), true;
  if (name == "apos") return out->push_back('\''), true;
  if (name.size() < 2 || name[0] != '#') return false;
  const bool hex = name[1] == 'x' || name[1] == 'X';
  absl::string_view digits = name.substr(hex ? 2 : 1);
  if (digits.empty() || digits.size() > 8) return false;
  uint32_t cp = 0;
  for (char c : digits) {
    int v;
    if (c >= '0' && c <= '9') {
      v = c - '0';
    } else if (hex && c >= 'a' && c <= 'f') {
      v = c - 'a' + 10;
    } else if (hex && c >= 'A' && c <= 'F') {
      v = c - 'A' + 10;
    } else {
      return false;
    }
    cp = cp * (hex ? 16 : 10) + v;
  }
  // XML 1.0 allows references only to its Char production. Anything else (NUL, other
  // C0 controls, surrogates, U+FFFE/U+FFFF) is malformed: decoding it would put a NUL or
  // invalid UTF-8 into an object key.
  const bool xml_char = cp == 0x9 || cp == 0xA || cp == 0xD || (cp >= 0x20 && cp <= 0xD7FF) ||
                        (cp >= 0xE000 && cp <= 0xFFFD) || (cp >= 0x10000 && cp <= 0x10FFFF);
  if (!xml_char) return false;
  AppendUtf8(cp, out);
  return true;
}

// The unescaped text of `node`: its PCDATA children through XmlUnescape (parsed without
// pugixml's own entity decoding, which turns &#0; into a NUL that cuts the string), its
// CDATA children verbatim.
std::string NodeText(pugi::xml_node node) {
  std::string out;
  for (pugi::xml_node child : node.children()) {
    if (child.type() == pugi::node_pcdata) out += XmlUnescape(child.value());
    if (child.type() == pugi::node_cdata) out += child.value();
  }
  return out;
}

// Parses `xml` into *doc; false when it is not well-formed XML.
bool Parse(absl::string_view xml, pugi::xml_document* doc, std::string* error) {
  constexpr unsigned kOptions = (pugi::parse_default & ~pugi::parse_escapes);
  const pugi::xml_parse_result result = doc->load_buffer(xml.data(), xml.size(), kOptions,
                                                         pugi::encoding_utf8);
  if (!result) {
    if (error != nullptr) {
      *error = absl::StrCat(result.description(), " at byte ", result.offset);
    }
    return false;
  }
  return true;
}

// The first element named `tag` in document order, or an empty node.
pugi::xml_node FindElement(pugi::xml_node root, absl::string_view tag) {
  return root.find_node([tag](pugi::xml_node n) {
    return n.type() == pugi::node_element && tag == n.name();
  });
}

// `node`'s markup, for error messages (at most 200 bytes).
std::string Quote(pugi::xml_node node) {
  std::ostringstream out;
  node.print(out, "", pugi::format_raw);
  return out.str().substr(0, 200);
}

}  // namespace

std::string XmlUnescape(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '&') {
      const size_t semi = text.find(';', i + 1);
      if (semi != absl::string_view::npos && semi - i <= 12 &&
          DecodeEntity(text.substr(i + 1, semi - i - 1), &out)) {
        i = semi;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

std::string XmlElementText(absl::string_view xml, absl::string_view tag, bool* found) {
  pugi::xml_document doc;
  pugi::xml_node node;
  if (Parse(xml, &doc, nullptr)) node = FindElement(doc, tag);
  if (found != nullptr) *found = !node.empty();
  return node.empty() ? std::string() : NodeText(node);
}

absl::StatusOr<ListPage> ParseListObjectsV2(absl::string_view xml) {
  pugi::xml_document doc;
  std::string error;
  if (!Parse(xml, &doc, &error)) {
    return absl::InvalidArgumentError(absl::StrCat("ListBucketResult is not well-formed XML (",
                                                   error, "): '", xml.substr(0, 200), "'"));
  }
  const pugi::xml_node root = doc.document_element();
  if (absl::string_view(root.name()) != "ListBucketResult") {
    return absl::InvalidArgumentError(
        absl::StrCat("not a ListBucketResult: '", xml.substr(0, 200), "'"));
  }
  ListPage page;
  for (pugi::xml_node entry : root.children("Contents")) {
    const pugi::xml_node key = entry.child("Key");
    ObjectInfo info;
    info.key = NodeText(key);
    if (key.empty() || info.key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ListBucketResult entry without a Key: '", Quote(entry), "'"));
    }
    const std::string size = NodeText(entry.child("Size"));
    if (!absl::SimpleAtoi(size, &info.size)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ListBucketResult: bad Size '", size, "' for key '", info.key, "'"));
    }
    const std::string mtime = NodeText(entry.child("LastModified"));
    std::string err;
    if (!absl::ParseTime("%Y-%m-%dT%H:%M:%E*S%Ez", mtime, &info.mtime, &err) &&
        !absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", mtime, &info.mtime, &err)) {
      info.mtime = absl::InfinitePast();
    }
    info.version = std::string(absl::StripSuffix(
        absl::StripPrefix(NodeText(entry.child("ETag")), "\""), "\""));
    page.objects.push_back(std::move(info));
  }
  // <CommonPrefixes><Prefix>a/b/</Prefix></CommonPrefixes>, one element per prefix (a
  // block holding several Prefix elements is read whole, too; an empty block is none).
  for (pugi::xml_node entry : root.children("CommonPrefixes")) {
    const bool has_element = entry.find_child(
        [](pugi::xml_node n) { return n.type() == pugi::node_element; });
    if (!has_element && absl::StripAsciiWhitespace(NodeText(entry)).empty()) continue;
    bool any = false;
    for (pugi::xml_node prefix : entry.children("Prefix")) {
      any = true;
      std::string text = NodeText(prefix);
      if (text.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "ListBucketResult CommonPrefixes entry with an empty Prefix: '", Quote(entry), "'"));
      }
      page.common_prefixes.push_back(std::move(text));
    }
    if (!any) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ListBucketResult CommonPrefixes entry without a Prefix: '", Quote(entry), "'"));
    }
  }
  page.truncated = NodeText(root.child("IsTruncated")) == "true";
  page.next_continuation_token = NodeText(root.child("NextContinuationToken"));
  return page;
}

std::string ParseS3Error(absl::string_view xml) {
  pugi::xml_document doc;
  if (!Parse(xml, &doc, nullptr)) return "";
  const pugi::xml_node root = doc.document_element();
  if (absl::string_view(root.name()) != "Error") return "";
  const std::string code = NodeText(root.child("Code"));
  const std::string message = NodeText(root.child("Message"));
  if (code.empty() && message.empty()) return "";
  return message.empty() ? code : absl::StrCat(code, ": ", message);
}

}  // namespace zephon::storage
