#include "daemon/storage/object_store.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace zephon::storage {
namespace {

constexpr char kS3Scheme[] = "s3://";
constexpr char kFileScheme[] = "file://";

bool IsLowerAlnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }

// RFC 3986 scheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ).
bool IsUrlScheme(absl::string_view s) {
  if (s.empty() || !absl::ascii_isalpha(static_cast<unsigned char>(s.front()))) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' &&
        c != '.') {
      return false;
    }
  }
  return true;
}

// Status payload of VersionMismatchError; its value is the found version.
constexpr char kVersionMismatchUrl[] = "type.zephon.dev/storage.VersionMismatch";

}  // namespace

absl::Status VersionMismatchError(absl::string_view object, absl::string_view expected,
                                  absl::string_view found, absl::string_view detail) {
  std::string msg = absl::StrCat(object, " changed: expected version '", expected, "', ");
  if (found.empty()) {
    absl::StrAppend(&msg, "the store holds another version");
  } else {
    absl::StrAppend(&msg, "found '", found, "'");
  }
  if (!detail.empty()) absl::StrAppend(&msg, " (", detail, ")");
  absl::Status status = absl::FailedPreconditionError(msg);
  status.SetPayload(kVersionMismatchUrl, absl::Cord(found));
  return status;
}

bool IsVersionMismatch(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) &&
         status.GetPayload(kVersionMismatchUrl).has_value();
}

std::string VersionMismatchFound(const absl::Status& status) {
  if (!IsVersionMismatch(status)) return "";
  return std::string(*status.GetPayload(kVersionMismatchUrl));
}

absl::Status ValidateKey(const std::string& key) {
  if (key.empty()) return absl::InvalidArgumentError("object key is empty");
  if (key.front() == '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("object key '", key, "' must be relative (no leading '/')"));
  }
  for (absl::string_view segment : absl::StrSplit(key, '/')) {
    if (segment.empty() || segment == "." || segment == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "object key '", key, "' has an empty, '.' or '..' path segment"));
    }
  }
  if (key.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("object key '", key, "' contains NUL"));
  }
  return absl::OkStatus();
}

absl::StatusOr<S3Location> ParseS3Url(const std::string& url) {
  if (!absl::StartsWith(url, kS3Scheme)) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", url, "' is not an s3:// URL (expected s3://bucket/prefix)"));
  }
  absl::string_view rest = absl::string_view(url).substr(sizeof(kS3Scheme) - 1);
  const size_t slash = rest.find('/');
  S3Location loc;
  loc.bucket = std::string(rest.substr(0, slash));
  if (slash != absl::string_view::npos) loc.key = std::string(rest.substr(slash + 1));
  if (loc.bucket.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", url, "' names no bucket (expected s3://bucket/prefix)"));
  }
  const std::string& b = loc.bucket;
  bool chars_ok = true;
  for (char c : b) chars_ok = chars_ok && (IsLowerAlnum(c) || c == '.' || c == '-');
  if (b.size() < 3 || b.size() > 63 || !chars_ok || !IsLowerAlnum(b.front()) ||
      !IsLowerAlnum(b.back())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "'", url, "': bucket name '", b,
        "' is invalid (3-63 chars of a-z, 0-9, '.', '-'; starting and ending with a "
        "letter or digit)"));
  }
  return loc;
}

absl::StatusOr<Location> ClassifyLocation(const std::string& location) {
  constexpr char kSupported[] = "a path, file:///path or s3://bucket/prefix";
  if (location.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("location is empty (use ", kSupported, ")"));
  }
  const size_t sep = location.find("://");
  if (sep == std::string::npos || !IsUrlScheme(absl::string_view(location).substr(0, sep))) {
    // "s3:/bucket" or "file:/x" is a mistyped URL, not a relative directory to create.
    for (absl::string_view scheme : {"s3:", "file:"}) {
      if (absl::StartsWith(absl::AsciiStrToLower(location.substr(0, scheme.size())), scheme)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "'", location, "' looks like a mistyped URL: expected ",
            scheme == "s3:" ? "s3://bucket/prefix" : "file:///abs/path", " (or write ./",
            location, " for a relative path)"));
      }
    }
    return Location{LocationKind::kLocal, location};
  }
  if (absl::StartsWith(location, kS3Scheme)) return Location{LocationKind::kS3, location};
  if (absl::StartsWith(location, kFileScheme)) {
    std::string path = location.substr(sizeof(kFileScheme) - 1);
    if (path.empty() || path.front() != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", location, "': file:// URLs need an absolute path (file:///abs/dir)"));
    }
    return Location{LocationKind::kLocal, std::move(path)};
  }
  const absl::string_view scheme = absl::string_view(location).substr(0, sep);
  const std::string hint = absl::EqualsIgnoreCase(scheme, "s3") ? "; use lowercase s3://" : "";
  return absl::InvalidArgumentError(absl::StrCat("'", location, "': unsupported scheme '",
                                                 scheme, "://'", hint, " (supported: ",
                                                 kSupported, ")"));
}

}  // namespace zephon::storage
