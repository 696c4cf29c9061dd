// Minimal readers for the XML bodies S3 sends back: ListObjectsV2 results and error
// documents. Not a general XML parser: it finds elements by name, which is enough for
// these flat, machine-written documents (S3 escapes '<' and '&' inside text, so element
// text never contains markup). Entities (&amp; &lt; &gt; &quot; &apos; &#N; &#xN;) are
// unescaped.
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

// The unescaped text of the first <tag>...</tag> in `xml` ("" for <tag/>); "" with
// *found = false when there is none. `found` may be null.
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
// when it is not one, a Contents entry lacks a Key or has a non-numeric Size, or a
// CommonPrefixes entry has no (or an empty) Prefix; an unparseable LastModified gives
// mtime = absl::InfinitePast().
absl::StatusOr<ListPage> ParseListObjectsV2(absl::string_view xml);

// "Code: Message" of an S3 <Error> document; "" when `xml` is not one.
std::string ParseS3Error(absl::string_view xml);

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_S3_XML_H_
