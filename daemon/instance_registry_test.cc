#include "daemon/instance_registry.h"

#include <stdlib.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/temp_dir_testing.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "daemon/storage/local_store.h"
#include "daemon/storage/shard_cache.h"

namespace zephon::daemon {
namespace {

std::string TempDir() { return testing::MakeTempDir("registry"); }

// Runs `call` on a thread of its own (joined on destruction).
class Probe {
 public:
  template <typename F>
  explicit Probe(F call)
      : thread_([this, call] {
          call();
          done_.Notify();
        }) {}
  ~Probe() { thread_.join(); }
  // True when the call has not returned within `wait`.
  bool BlocksFor(absl::Duration wait) { return !done_.WaitForNotificationWithTimeout(wait); }

 private:
  absl::Notification done_;
  std::thread thread_;
};

// The first Read after a restart scans the cache directory (slow on a big cache or a
// slow disk). Meanwhile a Status() (a /metrics scrape) must answer, and must not hold
// up the registry: TEST_before_scan holds the scan open until the test releases it.
TEST(InstanceRegistryTest, StatusAnswersWhileTheShardCacheScansItsDirectory) {
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  const std::string cache_dir = dir + "/objects";
  absl::Notification scanning, release;
  storage::ShardCacheOptions cache_options;
  cache_options.dir = cache_dir;
  cache_options.max_bytes = 1 << 20;
  cache_options.TEST_before_scan = [&] {
    scanning.Notify();
    release.WaitForNotificationWithTimeout(absl::Seconds(30));
  };
  auto cache = storage::ShardCache::Create(cache_options);
  ASSERT_TRUE(cache.ok()) << cache.status();
  auto store = storage::LocalStore::Open(dir + "/store");
  ASSERT_TRUE(store.ok()) << store.status();
  ASSERT_TRUE((*store)->Put("k", "abc").ok());
  storage::RemoteObject object;
  object.store_id = "local";
  object.url = "file://" + dir + "/store/k";
  object.info = (*store)->Head("k").value();

  RegistryOptions options;
  options.shard_cache = *cache;
  InstanceRegistry registry(options);

  char bytes[3] = {};
  absl::Status read_status;
  std::thread reader([&] { read_status = (*cache)->Read(**store, object, 0, 3, bytes); });
  ASSERT_TRUE(scanning.WaitForNotificationWithTimeout(absl::Seconds(20)));

  proto::StatusReply reply;
  {
    Probe status([&] { reply = registry.Status(); });
    Probe registry_probe([&] { registry.total_readers(); });
    EXPECT_FALSE(status.BlocksFor(absl::Seconds(10))) << "Status() waited for the scan";
    EXPECT_FALSE(registry_probe.BlocksFor(absl::Seconds(10)));
  }
  EXPECT_EQ(reply.shard_cache().dir(), cache_dir);
  EXPECT_EQ(reply.instances_size(), 0);

  release.Notify();
  reader.join();
  EXPECT_TRUE(read_status.ok()) << read_status;
  EXPECT_EQ(std::string(bytes, 3), "abc");
}

}  // namespace
}  // namespace zephon::daemon
