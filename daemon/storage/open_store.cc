#include "daemon/storage/open_store.h"

#include <utility>

#include "common/status_macros.h"
#include "daemon/storage/local_store.h"
#include "daemon/storage/s3_store.h"

namespace zephon::storage {

absl::StatusOr<std::unique_ptr<ObjectStore>> OpenStore(const std::string& url,
                                                       const S3Options& s3_defaults,
                                                       absl::Duration call_budget,
                                                       Env* env) {
  ASSIGN_OR_RETURN(Location location, ClassifyLocation(url));
  if (location.kind == LocationKind::kS3) {
    ASSIGN_OR_RETURN(std::unique_ptr<S3Store> store,
                     S3Store::OpenUrl(location.path_or_url, s3_defaults, call_budget));
    return std::unique_ptr<ObjectStore>(std::move(store));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<LocalStore> store, LocalStore::Open(location.path_or_url, env));
  return std::unique_ptr<ObjectStore>(std::move(store));
}

}  // namespace zephon::storage
