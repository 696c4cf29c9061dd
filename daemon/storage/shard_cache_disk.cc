#include "daemon/storage/shard_cache_disk.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/owned_path.h"
#include "common/status_macros.h"

namespace zephon::storage {
namespace {

constexpr char kLockName[] = ".lock";

}  // namespace

CacheDirLock::CacheDirLock(CacheDirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

CacheDirLock& CacheDirLock::operator=(CacheDirLock&& other) noexcept {
  if (this != &other) {
    Reset();
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void CacheDirLock::Reset() {
  if (fd_ >= 0) close(fd_);  // closing the last descriptor releases the flock
  fd_ = -1;
}

absl::StatusOr<CacheDirLock> LockCacheDir(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kLockName);
  absl::StatusOr<int> opened = OpenOwnedFile(path, O_RDWR, 0600, geteuid());
  if (!opened.ok()) return absl::UnavailableError(opened.status().message());
  CacheDirLock lock;
  lock.fd_ = *opened;
  if (flock(lock.fd_, LOCK_EX | LOCK_NB) != 0) return absl::UnavailableError("flock held");
  return lock;
}

absl::StatusOr<OpenedCacheDir> OpenCacheDir(const std::string& dir,
                                            const std::function<void()>& before_scan) {
  RETURN_IF_ERROR(EnsureEntryDir(dir));
  OpenedCacheDir opened;
  ASSIGN_OR_RETURN(opened.lock, LockCacheDir(dir));
  if (before_scan) before_scan();
  opened.rejected = ScanEntryDir(dir, &opened.files);
  return opened;
}

absl::StatusOr<EntryFileMap> StoreEntryFile(const std::string& path,
                                            const std::string& identity,
                                            const std::string& payload, bool* written) {
  *written = false;
  RETURN_IF_ERROR(WriteEntryFile(path, identity, payload));
  *written = true;
  return MapEntryFile(path, identity, payload.size(), /*expect_crc=*/std::nullopt);
}

void PendingDeletes::Add(const std::string& path) {
  absl::MutexLock lock(&mu_);
  ++pending_[path];
}

void PendingDeletes::Delete(const std::vector<std::string>& paths) {
  if (paths.empty()) return;
  for (const std::string& path : paths) unlink(path.c_str());
  absl::MutexLock lock(&mu_);
  for (const std::string& path : paths) {
    auto it = pending_.find(path);
    if (it != pending_.end() && --it->second == 0) pending_.erase(it);
  }
  deleted_.SignalAll();
}

bool PendingDeletes::WaitUntilDeleted(const std::string& path, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  while (pending_.count(path) > 0) {
    if (deleted_.WaitWithDeadline(&mu_, deadline)) return pending_.count(path) == 0;
  }
  return true;
}

}  // namespace zephon::storage
