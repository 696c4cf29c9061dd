#include "daemon/storage/shard_cache_fetch.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace zephon::storage {

absl::StatusOr<std::string> FetchBlock(ObjectStore& store, const std::string& url,
                                       const ObjectInfo& info, uint64_t block_bytes,
                                       uint64_t block, uint64_t length, bool verify_version) {
  const bool whole = info.size <= block_bytes;
  const uint64_t offset = whole ? 0 : block * block_bytes;
  const std::string what =
      whole ? url
            : absl::StrCat("block ", block, " (bytes [", offset, ", ", offset + length,
                           ")) of ", url);
  const std::string changed = absl::StrCat(
      ": the object changed since the dataset was opened (it had ", info.size,
      " bytes then); restart the pipeline to read the new object");
  // With a version, the read is conditional (If-Match on S3, the opened file's version
  // locally): the store fails it instead of returning bytes of a replaced object, in
  // the same request, so a block never mixes two objects.
  const std::string if_version = verify_version ? info.version : std::string();
  absl::StatusOr<std::string> bytes = whole ? store.Get(info.key, if_version)
                                            : store.GetRange(info.key, offset, length, if_version);
  if (!bytes.ok() && IsVersionMismatch(bytes.status())) {
    const std::string found = VersionMismatchFound(bytes.status());
    return absl::FailedPreconditionError(absl::StrCat(
        url, " changed since the dataset was opened (version '", info.version, "', ",
        info.size, " bytes then; ",
        found.empty() ? std::string("another version") : absl::StrCat("version '", found, "'"),
        " now): its cached bytes would mix two objects; restart the pipeline to read the new "
        "object"));
  }
  if (!bytes.ok() && absl::IsOutOfRange(bytes.status())) {
    // The range lies within the length seen at open (a REQUIRES), so the store's
    // "past the end" means the object shrank: a changed length, DATA_LOSS.
    return absl::DataLossError(absl::StrCat("reading ", what, ": the store says it passes "
                                            "the end of the object", changed));
  }
  if (!bytes.ok()) {
    // Short: this message may end up in a ring's 256-byte poison reason. The store's
    // own message usually names the URL already.
    const absl::string_view cause = bytes.status().message();
    std::string where = whole ? "" : absl::StrCat("block ", block);
    if (!absl::StrContains(cause, url)) {
      where = absl::StrCat(where, where.empty() ? "" : " of ", url);
    }
    return absl::Status(bytes.status().code(),
                        where.empty() ? std::string(cause) : absl::StrCat(where, ": ", cause));
  }
  // Stores without versions (and verify_version = false) only have the length to go by.
  if (bytes->size() != length) {
    return absl::DataLossError(absl::StrCat("reading ", what, ": the store returned ",
                                            bytes->size(), " bytes, expected ", length,
                                            changed));
  }
  return std::move(bytes).value();
}

}  // namespace zephon::storage
