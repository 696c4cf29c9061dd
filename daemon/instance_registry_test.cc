#include "daemon/instance_registry.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/fake_env.h"
#include "common/temp_dir_testing.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "daemon/pipeline/formats/testing_corpus.h"
#include "daemon/pipeline/formats/token_cache.h"
#include "daemon/storage/local_store.h"
#include "daemon/storage/shard_cache.h"
#include "shm/ring_layout.h"

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

TEST(InstanceRegistryTest, StatusCarriesTheTokenCacheStatsWhenThereIsOne) {
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  ASSERT_TRUE(pipeline::testing::WriteTextFile(dir + "/0123.tok", std::string(40, 't')).ok());
  ASSERT_TRUE(pipeline::testing::WriteTextFile(dir + "/0123.off", std::string(16, 'o')).ok());
  auto token_cache = pipeline::TokenCache::Create(dir, 1000);
  ASSERT_TRUE(token_cache.ok()) << token_cache.status();
  RegistryOptions options;
  options.token_cache = *token_cache;
  const proto::StatusReply reply = InstanceRegistry(options).Status();
  ASSERT_TRUE(reply.has_token_cache());
  EXPECT_EQ(reply.token_cache().dir(), dir);
  EXPECT_EQ(reply.token_cache().entries(), 1u);
  EXPECT_EQ(reply.token_cache().bytes(), 56u);
  EXPECT_EQ(reply.token_cache().budget_bytes(), 1000u);
  EXPECT_EQ(reply.token_cache().adopted(), 1u);
  EXPECT_FALSE(InstanceRegistry(RegistryOptions()).Status().has_token_cache());
}

// A ring's memfds cannot be created (the open-file limit, injected through the Env):
// the attach fails with the ring's name and the fix, leaves nothing registered, and the
// next attach (the limit raised) succeeds.
TEST(InstanceRegistryTest, AttachFailsCleanlyWhenTheRingsMemfdCannotBeCreated) {
  const std::string dir = TempDir();
  ASSERT_FALSE(dir.empty());
  std::filesystem::create_directories(dir + "/web");
  ASSERT_TRUE(pipeline::testing::WriteMegatronShard(dir + "/web/shard0",
                                                    {{1, 2, 3, 4, 5}, {6, 7, 8}, {9, 10}})
                  .ok());
  proto::AttachRequest request;
  request.set_ring_abi_major(shm::kLayoutMajor);
  proto::DatasetSpec* dataset = request.mutable_spec()->mutable_work_source()->add_datasets();
  dataset->set_name("web");
  dataset->set_path(dir + "/web");
  dataset->set_format("megatron");
  request.mutable_spec()->mutable_work_source()->set_chunk_size(2);
  request.mutable_spec()->add_operators()->mutable_pack_flat()->set_max_length(8);
  request.mutable_spec()->add_operators()->mutable_batch()->set_microbatch_size(2);
  request.mutable_rank()->set_global_rank(0);

  FakeEnv env;
  RegistryOptions options;
  options.shm_prefix = absl::StrCat("zephon-test.", getpid(), ".memfd");
  options.cache_dir = dir + "/cache";
  options.env = &env;
  InstanceRegistry registry(options);

  env.FailNext(FakeEnv::Op::kMemfd, 1, EMFILE);
  absl::StatusOr<Attachment> failed = registry.Attach(request);
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(failed.status())) << failed.status();
  const std::string message(failed.status().message());
  EXPECT_NE(message.find("ring segment " + options.shm_prefix + "."), std::string::npos)
      << message;
  EXPECT_NE(message.find("ulimit -n"), std::string::npos) << message;
  EXPECT_EQ(env.faults_fired(FakeEnv::Op::kMemfd), 1);
  EXPECT_EQ(registry.Status().instances_size(), 0);
  EXPECT_EQ(registry.total_readers(), 0);

  absl::StatusOr<Attachment> attached = registry.Attach(request);
  ASSERT_TRUE(attached.ok()) << attached.status();
  EXPECT_EQ(registry.Status().instances_size(), 1);
  EXPECT_EQ(registry.total_readers(), 1);
  registry.Detach(*attached, /*died=*/false);
  EXPECT_EQ(registry.total_readers(), 0);
}

}  // namespace
}  // namespace zephon::daemon
