// OpenStore: the one function that turns a location (aggregate_dir, a dataset root) into
// an ObjectStore, choosing the implementation by ClassifyLocation (object_store.h). Kept
// apart so the ObjectStore interface does not depend on its implementations.
//
// Thread-safety: thread-safe.
#ifndef ZEPHON_DAEMON_STORAGE_OPEN_STORE_H_
#define ZEPHON_DAEMON_STORAGE_OPEN_STORE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "daemon/storage/object_store.h"
#include "daemon/storage/s3_store.h"

namespace zephon::storage {

// Opens the store rooted at `url`:
//   "/abs/dir", "rel/dir", "file:///abs/dir" -> LocalStore (the directory is created if
//                                               missing)
//   "s3://bucket[/prefix]"                    -> S3Store::OpenUrl from `s3_defaults`
//                                               (the owner's --s3-* settings), the
//                                               rest from the environment;
//                                               FAILED_PRECONDITION without credentials
// Any other "scheme://" is INVALID_ARGUMENT, as is "" (ClassifyLocation's errors).
// `call_budget` bounds each call of an S3 store, retries included (S3Store::OpenUrl);
// a LocalStore ignores it. A LocalStore writes and deletes through `env` (LocalStore::Open),
// which must outlive the store.
absl::StatusOr<std::unique_ptr<ObjectStore>> OpenStore(
    const std::string& url, const S3Options& s3_defaults,
    absl::Duration call_budget = absl::InfiniteDuration(), Env* env = Env::Default());

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_OPEN_STORE_H_
