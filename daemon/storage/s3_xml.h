// Readers for the XML bodies S3 sends back: ListObjectsV2 results and error documents,
// parsed with pugixml. Element text is PCDATA with entities decoded by XmlUnescape (so
// a reference to a non-XML character stays verbatim) plus CDATA verbatim. Names are
// matched literally (a prefixed "s3:Key" is not "Key"; S3 uses a default namespace).
//
// Thread-safety: thread-safe (pure functions).
#ifndef ZEPHON_DAEMON_STORAGE_S3_XML_H_
#define ZEPHON_DAEMON_STORAGE_S3_XML_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/storage/object_store.h"

namespace zephon::storage {

// Replaces XML entities in `text`. Unknown or malformed entities are kept verbatim; a
// character reference is malformed unless it names an XML 1.0 Char (#x9, #xA, #xD,
// #x20-#xD7FF, #xE000-#xFFFD, #x10000-#x10FFFF), so the result never gains a NUL or a
// lone surrogate.
std::string XmlUnescape(absl::string_view text);

// The text of the first element named `tag` in `xml`, in document order ("" for
// <tag/>); "" with *found = false when there is none or `xml` is not well-formed (an
// HTML error page from a proxy). `found` may be null.
std::string XmlElementText(absl::string_view xml, absl::string_view tag, bool* found);

struct ListPage {
  std::vector<ObjectInfo> objects;       // keys as S3 sent them (full bucket keys)
  // CommonPrefixes/Prefix values in document order (full bucket keys ending in the
  // delimiter); only a listing with a delimiter has them.
  std::vector<std::string> common_prefixes;
  bool truncated = false;                // IsTruncated
  std::string next_continuation_token;  // NextContinuationToken ("" when absent)
};

// Parses a ListBucketResult (ListObjectsV2). INVALID_ARGUMENT (quoting the bad value)
// when it is not well-formed XML or not a ListBucketResult, a Contents entry lacks a Key or has a non-numeric Size, or a
// CommonPrefixes entry has no (or an empty) Prefix; an unparseable LastModified gives
// mtime = absl::InfinitePast().
absl::StatusOr<ListPage> ParseListObjectsV2(absl::string_view xml);

// "Code: Message" of an S3 <Error> document; "" when `xml` is not one (or is malformed).
std::string ParseS3Error(absl::string_view xml);

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_S3_XML_H_
