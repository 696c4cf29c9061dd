#include "daemon/storage/s3_xml.h"

#include <cstdint>
#include <cstdlib>

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

// Each <tag>...</tag> block's inner text (raw, still escaped), in document order.
std::vector<absl::string_view> Elements(absl::string_view xml, absl::string_view tag) {
  std::vector<absl::string_view> out;
  const std::string open = absl::StrCat("<", tag);
  const std::string close = absl::StrCat("</", tag, ">");
  size_t pos = 0;
  while ((pos = xml.find(open, pos)) != absl::string_view::npos) {
    const size_t after = pos + open.size();
    if (after >= xml.size()) break;
    const char next = xml[after];
    if (next != '>' && next != ' ' && next != '/' && next != '\t' && next != '\n' &&
        next != '\r') {
      pos = after;  // a longer tag name with this prefix
      continue;
    }
    const size_t gt = xml.find('>', after);
    if (gt == absl::string_view::npos) break;
    if (xml[gt - 1] == '/') {  // <tag/>
      out.push_back(absl::string_view());
      pos = gt + 1;
      continue;
    }
    const size_t end = xml.find(close, gt + 1);
    if (end == absl::string_view::npos) break;
    out.push_back(xml.substr(gt + 1, end - gt - 1));
    pos = end + close.size();
  }
  return out;
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
  std::vector<absl::string_view> all = Elements(xml, tag);
  if (found != nullptr) *found = !all.empty();
  return all.empty() ? std::string() : XmlUnescape(all.front());
}

absl::StatusOr<ListPage> ParseListObjectsV2(absl::string_view xml) {
  if (xml.find("<ListBucketResult") == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a ListBucketResult: '", xml.substr(0, 200), "'"));
  }
  ListPage page;
  for (absl::string_view entry : Elements(xml, "Contents")) {
    bool has_key = false;
    ObjectInfo info;
    info.key = XmlElementText(entry, "Key", &has_key);
    if (!has_key || info.key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ListBucketResult entry without a Key: '", entry, "'"));
    }
    const std::string size = XmlElementText(entry, "Size", nullptr);
    if (!absl::SimpleAtoi(size, &info.size)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ListBucketResult: bad Size '", size, "' for key '", info.key, "'"));
    }
    const std::string mtime = XmlElementText(entry, "LastModified", nullptr);
    std::string err;
    if (!absl::ParseTime("%Y-%m-%dT%H:%M:%E*S%Ez", mtime, &info.mtime, &err) &&
        !absl::ParseTime("%Y-%m-%dT%H:%M:%E*SZ", mtime, &info.mtime, &err)) {
      info.mtime = absl::InfinitePast();
    }
    info.version = std::string(absl::StripSuffix(
        absl::StripPrefix(XmlElementText(entry, "ETag", nullptr), "\""), "\""));
    page.objects.push_back(std::move(info));
  }
  // <CommonPrefixes><Prefix>a/b/</Prefix></CommonPrefixes>, one element per prefix (a
  // block holding several Prefix elements is read whole, too; an empty block is none).
  for (absl::string_view entry : Elements(xml, "CommonPrefixes")) {
    if (absl::StripAsciiWhitespace(entry).empty()) continue;
    const std::vector<absl::string_view> prefixes = Elements(entry, "Prefix");
    if (prefixes.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ListBucketResult CommonPrefixes entry without a Prefix: '", entry, "'"));
    }
    for (absl::string_view prefix : prefixes) {
      if (prefix.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("ListBucketResult CommonPrefixes entry with an empty Prefix: '", entry,
                         "'"));
      }
      page.common_prefixes.push_back(XmlUnescape(prefix));
    }
  }
  // IsTruncated and NextContinuationToken appear only at the top level.
  page.truncated = XmlElementText(xml, "IsTruncated", nullptr) == "true";
  page.next_continuation_token = XmlElementText(xml, "NextContinuationToken", nullptr);
  return page;
}

std::string ParseS3Error(absl::string_view xml) {
  if (xml.find("<Error") == absl::string_view::npos) return "";
  const std::string code = XmlElementText(xml, "Code", nullptr);
  const std::string message = XmlElementText(xml, "Message", nullptr);
  if (code.empty() && message.empty()) return "";
  return message.empty() ? code : absl::StrCat(code, ": ", message);
}

}  // namespace zephon::storage
