// ObjectStore: the one storage interface behind aggregate_dir (checkpoints, rendezvous
// files) and dataset readers. A store is a flat namespace of keys ("a/b/c.bin") mapping
// to immutable byte strings, as in S3: a Put replaces a whole object atomically, and
// readers see either the old or the new bytes, never a mix.
//
// Implementations: LocalStore (local_store.h) for plain paths and file:// URLs, S3Store
// (s3_store.h) for s3:// URLs; OpenStore (open_store.h) picks one for a location.
//
// Keys are '/'-separated, relative (no leading '/'), with no empty, "." or ".."
// segments; every method rejects other keys with INVALID_ARGUMENT.
//
// Thread-safety: implementations are thread-safe; concurrent Puts to one key leave one
// of the written values (last rename wins), never a torn object.
#ifndef ZEPHON_DAEMON_STORAGE_OBJECT_STORE_H_
#define ZEPHON_DAEMON_STORAGE_OBJECT_STORE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace zephon::storage {

struct ObjectInfo {
  std::string key;     // relative to the store root, as passed to Get
  uint64_t size = 0;   // bytes
  absl::Time mtime;    // last modification (local: file mtime; S3: Last-Modified)
  // A token that changes whenever the object's bytes change (S3: the ETag without
  // quotes; local: "<size>-<mtime ns>-<inode>"). Caches key on it; "" when unknown.
  std::string version;
};

// One level of the key hierarchy under a prefix, as ObjectStore::ListDirectory sees it
// ('/' is the only separator; S3's ListObjectsV2 with delimiter=/).
struct DirectoryListing {
  // The objects whose key starts with the prefix and has no '/' after it, sorted by key.
  std::vector<ObjectInfo> objects;
  // The deeper objects, rolled up: for each object whose key has a '/' after the prefix,
  // that key up to and including the first such '/' ("a/b/" for "a/b/c/d" under "a/"),
  // each once, sorted (S3's CommonPrefixes). A prefix is here only when at least one
  // object lies under it, so an empty local subdirectory does not appear.
  std::vector<std::string> common_prefixes;
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;

  // Conditional reads. Get and GetRange take an optional `if_version`, an
  // ObjectInfo::version seen earlier (Head, List). "" reads whatever the object holds
  // now. Otherwise the read is atomic with the check: when the object's current version
  // differs, no bytes come back and the call fails with VersionMismatchError
  // (FAILED_PRECONDITION naming the object, "changed", the expected version and the
  // found one when the store knows it; IsVersionMismatch() is true for it). S3Store sends
  // If-Match; LocalStore compares the version of the file it opened before reading it.
  // The version check comes before OUT_OF_RANGE, so a replaced, shorter object reports
  // the change, not the offset. A missing object is NOT_FOUND either way.
  //
  // Overrides repeat the default `if_version = ""` (a default argument on a virtual
  // binds statically; every implementation must agree on it).

  // The whole object. NOT_FOUND if `key` does not exist; other errors name the object.
  virtual absl::StatusOr<std::string> Get(const std::string& key,
                                          const std::string& if_version = "") = 0;

  // Bytes [offset, offset + length) of the object, truncated at its end (so fewer
  // than `length` bytes come back only at the end). OUT_OF_RANGE if offset > size;
  // offset == size gives "". NOT_FOUND if `key` does not exist.
  virtual absl::StatusOr<std::string> GetRange(const std::string& key, uint64_t offset,
                                               uint64_t length,
                                               const std::string& if_version = "") = 0;

  // Creates or atomically replaces the whole object. On error the previous object (if
  // any) is unchanged and no partial object is visible.
  virtual absl::Status Put(const std::string& key, std::string_view bytes) = 0;

  // Every object whose key starts with `prefix` (a plain string prefix, as in S3; ""
  // lists everything), sorted by key. An empty result is OK, not NOT_FOUND.
  virtual absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) = 0;

  // List, one level deep: the objects whose key starts with `prefix` and has no '/'
  // after it, and the common prefixes of the deeper ones (see DirectoryListing).
  // "data/" lists the "directory" data/; "data/shard-" its entries named shard-*. The
  // work is proportional to that level, not to the subtree under it (S3Store: paged
  // ListObjectsV2 with delimiter=/; LocalStore: one directory read, plus a search for
  // one object in each subdirectory that would be a common prefix). Empty is OK, not
  // NOT_FOUND; errors as List's.
  virtual absl::StatusOr<DirectoryListing> ListDirectory(const std::string& prefix) = 0;

  // Removes the object. Deleting a missing key is OK (idempotent, as in S3).
  virtual absl::Status Delete(const std::string& key) = 0;

  // Size and mtime without reading the bytes. NOT_FOUND if `key` does not exist.
  virtual absl::StatusOr<ObjectInfo> Head(const std::string& key) = 0;
};

// Where a location string (aggregate_dir, a dataset path) points. The one place that
// decides between the local filesystem and an object store; every component that takes
// a location classifies it here so they all accept the same forms.
enum class LocationKind { kLocal, kS3 };

struct Location {
  LocationKind kind = LocationKind::kLocal;
  // kLocal: the filesystem path ("file://" stripped); kS3: the URL unchanged.
  std::string path_or_url;
};

// Classifies `location`:
//   "/abs/dir", "rel/dir" (no scheme)  -> kLocal, the path unchanged
//   "file:///abs/dir"                  -> kLocal, "/abs/dir"
//   "s3://bucket[/prefix]"             -> kS3, the URL unchanged (not validated further:
//                                         ParseS3Url does that when the store opens)
// A scheme is the text before the first "://" when it is a URL scheme name (a letter,
// then letters, digits, '+', '-', '.'); a path like "./a://b" has none and is local.
// INVALID_ARGUMENT, quoting `location` and listing the supported forms, for "", any
// other scheme ("gs://", "http://", "S3://": schemes are matched in lowercase only) and
// a file:// URL without an absolute path ("file://rel", "file://host/x").
absl::StatusOr<Location> ClassifyLocation(const std::string& location);

struct S3Location {
  std::string bucket;
  std::string key;  // the part after "bucket/"; may be "" (the bucket root)
};

// "s3://bucket/prefix/x" -> {"bucket", "prefix/x"}; "s3://bucket" and "s3://bucket/"
// -> {"bucket", ""}. INVALID_ARGUMENT (quoting the URL) when the scheme is not s3://
// or the bucket name breaks S3's rules (3-63 chars of [a-z0-9.-], starting and ending
// with a letter or digit).
absl::StatusOr<S3Location> ParseS3Url(const std::string& url);

// OK iff `key` is a valid object key (see the file comment). The message names `key`.
absl::Status ValidateKey(const std::string& key);

// The error of a conditional read (if_version above) whose object is at another
// version: FAILED_PRECONDITION "<object> changed: expected version '<expected>', found
// '<found>'" (when `found` is "": "..., the store holds another version"), then
// " (<detail>)" when `detail` is not empty. `object` names it (path or URL). The status
// carries a payload that IsVersionMismatch recognises and VersionMismatchFound reads
// (Status::ToString shows it; print message() or kWithNoExtraData to users).
absl::Status VersionMismatchError(absl::string_view object, absl::string_view expected,
                                  absl::string_view found, absl::string_view detail = "");

// True iff `status` came from VersionMismatchError (other FAILED_PRECONDITIONs, e.g. a
// missing S3 bucket, are not version mismatches).
bool IsVersionMismatch(const absl::Status& status);

// The `found` version of a VersionMismatchError ("" when unknown or not a mismatch).
std::string VersionMismatchFound(const absl::Status& status);

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_OBJECT_STORE_H_
