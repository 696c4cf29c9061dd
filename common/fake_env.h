// FakeEnv: the Env for tests. A clock that moves only when the test says so, over the
// real filesystem and memfds (point tests at a temp dir), with injected faults: the next
// N atomic-write data writes, renames, file removals, memfd creations, reads (ReadFile
// and ReadableFile::ReadAt), directory listings or Stat calls fail with a chosen errno. A
// failed data write first writes half its bytes, so the failure strikes a partly written
// temp file and the writer's cleanup is what the test observes.
//
// Thread-safety: thread-safe (one mutex). Files from OpenForRead must not outlive the
// FakeEnv. Testonly.
#ifndef ZEPHON_COMMON_FAKE_ENV_H_
#define ZEPHON_COMMON_FAKE_ENV_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "common/env.h"

namespace zephon {

class FakeEnv final : public Env {
 public:
  enum class Op { kWrite, kRename, kRemove, kMemfd, kRead, kList, kStat };

  // The clock starts at `start` (a fixed instant, not the real time: tests are repeatable).
  explicit FakeEnv(absl::Time start = absl::FromUnixSeconds(1'800'000'000)) : now_(start) {}

  void SetNow(absl::Time now) ABSL_LOCKS_EXCLUDED(mu_);
  void Advance(absl::Duration by) ABSL_LOCKS_EXCLUDED(mu_);
  // The next `count` operations `op` fail with errno `err` (replacing an earlier setting).
  void FailNext(Op op, int count, int err) ABSL_LOCKS_EXCLUDED(mu_);
  // How many injected faults of `op` have fired.
  int faults_fired(Op op) const ABSL_LOCKS_EXCLUDED(mu_);

  absl::Time Now() override ABSL_LOCKS_EXCLUDED(mu_);
  // Advances the clock by `duration`; returns at once.
  void SleepFor(absl::Duration duration) override { Advance(duration); }
  absl::StatusOr<std::string> ReadFile(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<ReadableFile>> OpenForRead(const std::string& path) override;
  absl::Status WriteFileAtomically(const std::string& path, std::string_view bytes) override;
  absl::StatusOr<std::vector<std::string>> ListDirectory(const std::string& dir) override;
  absl::Status RemoveFile(const std::string& path) override;
  absl::StatusOr<FileStat> Stat(const std::string& path) override;
  absl::StatusOr<int> CreateMemfd(const std::string& name) override;

 private:
  struct Pending {
    int count = 0;
    int err = 0;
    int fired = 0;
  };
  class FaultyFile;

  // The errno to fail this `op` with, or 0 to run it for real.
  int TakeFault(Op op) ABSL_LOCKS_EXCLUDED(mu_);

  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  std::map<Op, Pending> faults_ ABSL_GUARDED_BY(mu_);
};

}  // namespace zephon

#endif  // ZEPHON_COMMON_FAKE_ENV_H_
