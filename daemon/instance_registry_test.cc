#include "daemon/instance_registry.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "daemon/storage/local_store.h"
#include "daemon/storage/shard_cache.h"

namespace zephon::daemon {
namespace {

std::string TempDir() {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string templ = absl::StrCat(tmp ? tmp : "/tmp", "/registry_XXXXXX");
  return mkdtemp(templ.data()) ? templ : "";
}

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

// The first Read after a restart scans the cache directory under the cache's lock; a
// FIFO named like an entry makes that scan block (opening it waits for a writer) until
// the test releases it. Meanwhile a Status() is waiting for the cache's stats: it must
// not be holding the registry's lock, or every Attach and Detach would wait too.
TEST(InstanceRegistryTest, StatusWaitingForTheShardCacheDoesNotBlockTheRegistry) {
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  const std::string cache_dir = dir + "/objects";
  ASSERT_EQ(mkdir(cache_dir.c_str(), 0700), 0);
  const std::string fifo = cache_dir + "/0123456789abcdef0123456789abcdef.blk";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);

  storage::ShardCacheOptions cache_options;
  cache_options.dir = cache_dir;
  cache_options.max_bytes = 1 << 20;
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

  // 1. A Read that stalls in the directory scan, holding the cache's lock.
  char bytes[3] = {};
  absl::Status read_status;
  std::thread reader([&] { read_status = (*cache)->Read(**store, object, 0, 3, bytes); });
  // Wait until the cache's lock is held: Stats() stops returning.
  std::unique_ptr<Probe> cache_probe;
  bool cache_locked = false;
  for (const absl::Time deadline = absl::Now() + absl::Seconds(20);
       !cache_locked && absl::Now() < deadline;) {
    cache_probe = std::make_unique<Probe>([&] { (*cache)->Stats(); });
    cache_locked = cache_probe->BlocksFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(cache_locked) << "the cache scan never blocked on the FIFO";

  // 2. A Status() (a /metrics scrape) waiting for the cache's stats.
  proto::StatusReply reply;
  Probe status([&] { reply = registry.Status(); });
  EXPECT_TRUE(status.BlocksFor(absl::Milliseconds(200)));

  // 3. The registry's lock is free meanwhile.
  Probe registry_probe([&] { registry.total_readers(); });
  EXPECT_FALSE(registry_probe.BlocksFor(absl::Seconds(5)))
      << "InstanceRegistry::Status held the registry lock while waiting for the cache";

  // Release the scan (the FIFO reads as an empty, invalid entry and is deleted).
  const int fd = open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  EXPECT_GE(fd, 0);
  if (fd >= 0) close(fd);
  reader.join();
  EXPECT_FALSE(status.BlocksFor(absl::Seconds(20)));
  EXPECT_FALSE(registry_probe.BlocksFor(absl::Seconds(20)));
  EXPECT_TRUE(read_status.ok()) << read_status;
  EXPECT_EQ(std::string(bytes, 3), "abc");
  EXPECT_EQ(reply.shard_cache().dir(), cache_dir);
  EXPECT_EQ(reply.instances_size(), 0);
}

}  // namespace
}  // namespace zephon::daemon
