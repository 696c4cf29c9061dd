// FetchBlock: one download of the shard cache (shard_cache.h), the bytes of one block of
// a remote object (or the whole object when it is one block), checked against what the
// dataset saw when it opened the object, with errors worded for the dataset's reader.
//
// With verify_version and a version (S3 ETag, local size-mtime-inode) the read is
// conditional (ObjectStore's if_version: If-Match on S3): the store fails it instead of
// returning bytes of a replaced object, in the same request, so a block never mixes two
// objects. Every fetch is also checked against the length the object had at open, the
// only check left for stores without versions.
//
// Thread-safety: thread-safe (no state of its own; as safe as `store`, which every
// ObjectStore is).
#ifndef ZEPHON_DAEMON_STORAGE_SHARD_CACHE_FETCH_H_
#define ZEPHON_DAEMON_STORAGE_SHARD_CACHE_FETCH_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/storage/object_store.h"

namespace zephon::storage {

// Block `block` of the object `info` describes as it was opened: all of it with one Get
// when info.size <= block_bytes, else bytes [block * block_bytes, + length) with one
// GetRange; conditional on info.version when verify_version and the version is known.
// `url` names the object in messages ("s3://bucket/key").
// REQUIRES: block_bytes >= 1; `length` is the block's length within info.size (the
// last block is shorter).
// Errors: FAILED_PRECONDITION ("changed since the dataset was opened", both versions)
// when the store reports another version; DATA_LOSS when the store returns another
// length than expected or says the range passes the object's end (the object shrank);
// otherwise the store's error with its code, prefixed with the block and `url` unless
// the store's message names `url` already (kept short: it may end up in a ring's
// poison reason). The caller's reaction: the dataset is unreadable as opened.
absl::StatusOr<std::string> FetchBlock(ObjectStore& store, const std::string& url,
                                       const ObjectInfo& info, uint64_t block_bytes,
                                       uint64_t block, uint64_t length, bool verify_version);

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_SHARD_CACHE_FETCH_H_
