#include "common/fake_env.h"

#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"

namespace zephon {

void FakeEnv::SetNow(absl::Time now) {
  absl::MutexLock lock(&mu_);
  now_ = now;
}

void FakeEnv::Advance(absl::Duration by) {
  absl::MutexLock lock(&mu_);
  now_ += by;
}

void FakeEnv::FailNext(Op op, int count, int err) {
  absl::MutexLock lock(&mu_);
  Pending& p = faults_[op];
  p.count = count;
  p.err = err;
}

int FakeEnv::faults_fired(Op op) const {
  absl::MutexLock lock(&mu_);
  auto it = faults_.find(op);
  return it == faults_.end() ? 0 : it->second.fired;
}

absl::Time FakeEnv::Now() {
  absl::MutexLock lock(&mu_);
  return now_;
}

int FakeEnv::TakeFault(Op op) {
  absl::MutexLock lock(&mu_);
  Pending& p = faults_[op];
  if (p.count <= 0) return 0;
  --p.count;
  ++p.fired;
  return p.err;
}

// The real file, its ReadAt failing while the FakeEnv has read faults to fire.
class FakeEnv::FaultyFile final : public ReadableFile {
 public:
  FaultyFile(FakeEnv* env, std::unique_ptr<ReadableFile> file, std::string path)
      : env_(env), file_(std::move(file)), path_(std::move(path)) {}

  absl::StatusOr<FileStat> Stat() override { return file_->Stat(); }
  absl::StatusOr<std::string> ReadAt(uint64_t offset, uint64_t length) override {
    if (const int err = env_->TakeFault(Op::kRead); err != 0) {
      return absl::ErrnoToStatus(err, absl::StrCat("cannot read ", path_));
    }
    return file_->ReadAt(offset, length);
  }

 private:
  FakeEnv* const env_;
  const std::unique_ptr<ReadableFile> file_;
  const std::string path_;
};

absl::StatusOr<std::string> FakeEnv::ReadFile(const std::string& path) {
  if (const int err = TakeFault(Op::kRead); err != 0) {
    return absl::ErrnoToStatus(err, absl::StrCat("cannot read ", path));
  }
  return Env::Default()->ReadFile(path);
}

absl::StatusOr<std::unique_ptr<ReadableFile>> FakeEnv::OpenForRead(const std::string& path) {
  absl::StatusOr<std::unique_ptr<ReadableFile>> file = Env::Default()->OpenForRead(path);
  if (!file.ok()) return file.status();
  return std::make_unique<FaultyFile>(this, *std::move(file), path);
}

absl::Status FakeEnv::WriteFileAtomically(const std::string& path, std::string_view bytes) {
  AtomicWriteSteps steps;
  steps.write_all = [this](int fd, std::string_view data) -> int {
    const int err = TakeFault(Op::kWrite);
    // On a fault half the bytes reach the temp file, as when a disk fills mid-write.
    std::string_view todo = err == 0 ? data : data.substr(0, data.size() / 2);
    while (!todo.empty()) {
      const ssize_t n = ::write(fd, todo.data(), todo.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return errno;
      todo.remove_prefix(static_cast<size_t>(n));
    }
    return err;
  };
  steps.rename = [this](const std::string& from, const std::string& to) -> int {
    const int err = TakeFault(Op::kRename);
    if (err != 0) return err;
    return ::rename(from.c_str(), to.c_str()) != 0 ? errno : 0;
  };
  return ::zephon::WriteFileAtomically(path, bytes, steps);
}

absl::StatusOr<std::vector<std::string>> FakeEnv::ListDirectory(const std::string& dir) {
  if (const int err = TakeFault(Op::kList); err != 0) {
    return absl::ErrnoToStatus(err, absl::StrCat("cannot list directory ", dir));
  }
  return Env::Default()->ListDirectory(dir);
}

absl::Status FakeEnv::RemoveFile(const std::string& path) {
  if (const int err = TakeFault(Op::kRemove); err != 0) {
    return absl::ErrnoToStatus(err, absl::StrCat("cannot remove ", path));
  }
  return Env::Default()->RemoveFile(path);
}

absl::StatusOr<FileStat> FakeEnv::Stat(const std::string& path) {
  if (const int err = TakeFault(Op::kStat); err != 0) {
    return absl::ErrnoToStatus(err, absl::StrCat("cannot stat ", path));
  }
  return Env::Default()->Stat(path);
}

absl::StatusOr<int> FakeEnv::CreateMemfd(const std::string& name) {
  if (const int err = TakeFault(Op::kMemfd); err != 0) {
    return absl::ErrnoToStatus(err, absl::StrCat("memfd_create(", name, ")"));
  }
  return Env::Default()->CreateMemfd(name);
}

}  // namespace zephon
