// FakeObjectStore: an in-memory ObjectStore for the shard cache's tests. It logs and counts
// reads, can hold them at a gate until the test opens it, and can fail them. Conditional
// reads (if_version) of another version fail with VersionMismatchError, as the real
// stores do. Writes and listings are UNIMPLEMENTED.
//
// Thread-safety: thread-safe. Testonly.
#ifndef ZEPHON_DAEMON_STORAGE_FAKE_OBJECT_STORE_TESTING_H_
#define ZEPHON_DAEMON_STORAGE_FAKE_OBJECT_STORE_TESTING_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/storage/object_store.h"

namespace zephon::storage {

class FakeObjectStore final : public ObjectStore {
 public:
  // Creates or replaces `key`; "" for a store without versions.
  void Set(const std::string& key, std::string bytes, std::string version)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Close(): reads wait at the gate until Open() (each at most 60 s, then proceeds).
  void Close() ABSL_LOCKS_EXCLUDED(mu_);
  void Open() ABSL_LOCKS_EXCLUDED(mu_);
  // Every read returns `status` while it is not OK.
  void FailWith(absl::Status status) ABSL_LOCKS_EXCLUDED(mu_);

  // The reads so far: "get <key> if '<version>'", "range <key> <offset>+<length> if
  // '<version>'".
  std::vector<std::string> reads() const ABSL_LOCKS_EXCLUDED(mu_);
  int gets() const { return gets_.load(); }
  int ranges() const { return ranges_.load(); }
  int heads() const { return heads_.load(); }
  int conditional() const { return conditional_.load(); }  // reads with an if_version
  int waiting() const { return waiting_.load(); }          // reads at the gate now

  absl::StatusOr<std::string> Get(const std::string& key,
                                  const std::string& if_version = "") override;
  absl::StatusOr<std::string> GetRange(const std::string& key, uint64_t offset,
                                       uint64_t length,
                                       const std::string& if_version = "") override;
  absl::Status Put(const std::string& key, std::string_view bytes) override;
  absl::StatusOr<std::vector<ObjectInfo>> List(const std::string& prefix) override;
  absl::StatusOr<DirectoryListing> ListDirectory(const std::string& prefix) override;
  absl::Status Delete(const std::string& key) override;
  // NOT_FOUND ("no <key>") for a key never Set.
  absl::StatusOr<ObjectInfo> Head(const std::string& key) override ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Object {
    std::string bytes;
    std::string version;
  };
  absl::StatusOr<std::string> Read(const std::string& key, uint64_t offset, uint64_t length,
                                   const std::string& if_version) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Object> objects_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> reads_ ABSL_GUARDED_BY(mu_);
  bool gate_open_ ABSL_GUARDED_BY(mu_) = true;
  absl::Status fail_ ABSL_GUARDED_BY(mu_);
  std::atomic<int> gets_{0}, ranges_{0}, heads_{0}, conditional_{0}, waiting_{0};
};

}  // namespace zephon::storage

#endif  // ZEPHON_DAEMON_STORAGE_FAKE_OBJECT_STORE_TESTING_H_
