#include "daemon/storage/fake_object_store_testing.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace zephon::storage {
namespace {

absl::Status ReadOnly() { return absl::UnimplementedError("read-only fake"); }

}  // namespace

void FakeObjectStore::Set(const std::string& key, std::string bytes, std::string version) {
  absl::MutexLock lock(&mu_);
  objects_[key] = {std::move(bytes), std::move(version)};
}

void FakeObjectStore::Close() {
  absl::MutexLock lock(&mu_);
  gate_open_ = false;
}

void FakeObjectStore::Open() {
  absl::MutexLock lock(&mu_);
  gate_open_ = true;
}

void FakeObjectStore::FailWith(absl::Status status) {
  absl::MutexLock lock(&mu_);
  fail_ = std::move(status);
}

std::vector<std::string> FakeObjectStore::reads() const {
  absl::MutexLock lock(&mu_);
  return reads_;
}

absl::StatusOr<std::string> FakeObjectStore::Get(const std::string& key,
                                                 const std::string& if_version) {
  ++gets_;
  {
    absl::MutexLock lock(&mu_);
    reads_.push_back(absl::StrCat("get ", key, " if '", if_version, "'"));
  }
  return Read(key, 0, UINT64_MAX, if_version);
}

absl::StatusOr<std::string> FakeObjectStore::GetRange(const std::string& key, uint64_t offset,
                                                      uint64_t length,
                                                      const std::string& if_version) {
  ++ranges_;
  {
    absl::MutexLock lock(&mu_);
    reads_.push_back(
        absl::StrCat("range ", key, " ", offset, "+", length, " if '", if_version, "'"));
  }
  return Read(key, offset, length, if_version);
}

absl::Status FakeObjectStore::Put(const std::string&, std::string_view) { return ReadOnly(); }

absl::StatusOr<std::vector<ObjectInfo>> FakeObjectStore::List(const std::string&) {
  return ReadOnly();
}

absl::StatusOr<DirectoryListing> FakeObjectStore::ListDirectory(const std::string&) {
  return ReadOnly();
}

absl::Status FakeObjectStore::Delete(const std::string&) { return ReadOnly(); }

absl::StatusOr<ObjectInfo> FakeObjectStore::Head(const std::string& key) {
  ++heads_;
  absl::MutexLock lock(&mu_);
  auto it = objects_.find(key);
  if (it == objects_.end()) return absl::NotFoundError(absl::StrCat("no ", key));
  ObjectInfo info;
  info.key = key;
  info.size = it->second.bytes.size();
  info.version = it->second.version;
  return info;
}

absl::StatusOr<std::string> FakeObjectStore::Read(const std::string& key, uint64_t offset,
                                                  uint64_t length,
                                                  const std::string& if_version) {
  if (!if_version.empty()) ++conditional_;
  ++waiting_;
  {
    absl::MutexLock lock(&mu_);
    mu_.AwaitWithTimeout(absl::Condition(&gate_open_), absl::Seconds(60));
  }
  --waiting_;
  absl::MutexLock lock(&mu_);
  if (!fail_.ok()) return fail_;
  auto it = objects_.find(key);
  if (it == objects_.end()) return absl::NotFoundError(absl::StrCat("no object ", key));
  if (!if_version.empty() && it->second.version != if_version) {
    return VersionMismatchError(absl::StrCat("fake object ", key), if_version,
                                it->second.version);
  }
  const std::string& bytes = it->second.bytes;
  if (offset > bytes.size()) return absl::OutOfRangeError("offset past the end");
  return bytes.substr(offset, length);
}

}  // namespace zephon::storage
