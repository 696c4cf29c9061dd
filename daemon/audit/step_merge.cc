#include "daemon/audit/step_merge.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "common/file_io.h"
#include "common/little_endian.h"
#include "common/logging.h"
#include "daemon/audit/audit_diff.h"
#include "daemon/audit/audit_log.h"

namespace zephon::audit {
namespace {

constexpr char kStepsMagic[] = "ZSTEPS01";
constexpr size_t kHeaderBytes = 12;  // magic + u32 C
constexpr size_t kEntryBytes = 40;   // u64 lane round + 32-byte digest

// The digest of lane round j: every lane's batch j, in lane order.
std::string RoundDigest(const RunIndex& run, uint64_t j) {
  std::string bytes;
  for (uint32_t lane = 0; lane < run.canonical_replicas; ++lane) {
    const proto::AuditRecord& r = run.batches.at({lane, j});
    bytes += r.token_sha256();
    for (uint64_t id : r.sample_ids()) AppendLittleEndian(id, 8, &bytes);
  }
  return Sha256(bytes);
}

}  // namespace

absl::StatusOr<std::vector<MergedRound>> ReadMergedSteps(const std::string& dir,
                                                         uint32_t* canonical_replicas) {
  const std::string path = absl::StrCat(dir, "/", kStepsFile);
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (absl::IsNotFound(bytes.status())) return std::vector<MergedRound>();
  if (!bytes.ok()) return bytes.status();
  if (bytes->size() < kHeaderBytes || bytes->compare(0, 8, kStepsMagic) != 0) {
    return absl::DataLossError(absl::StrCat(path, " is not a merged steps file (no ",
                                            kStepsMagic, " header)"));
  }
  if (canonical_replicas != nullptr) {
    *canonical_replicas = static_cast<uint32_t>(LoadLittleEndian(bytes->data() + 8, 4));
  }
  std::vector<MergedRound> out;
  for (size_t at = kHeaderBytes; at + kEntryBytes <= bytes->size(); at += kEntryBytes) {
    out.push_back(MergedRound{LoadLittleEndian(bytes->data() + at, 8), bytes->substr(at + 8, 32)});
  }
  return out;  // a torn last entry (fewer than 40 bytes) is not one
}

absl::StatusOr<uint64_t> MergeSteps(const std::string& dir, uint64_t through) {
  absl::StatusOr<std::vector<proto::AuditRecord>> records = ReadAuditDir(dir);
  if (!records.ok()) return records.status();
  absl::StatusOr<RunIndex> run = IndexRun(*records);
  if (!run.ok()) return run.status();
  uint32_t c = 0;
  absl::StatusOr<std::vector<MergedRound>> merged = ReadMergedSteps(dir, &c);
  if (!merged.ok()) return merged.status();
  const std::string path = absl::StrCat(dir, "/", kStepsFile);
  if (!merged->empty() && c != run->canonical_replicas) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " merges ", c, " lanes but the run's audit records have ",
        run->canonical_replicas));
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  // Start right after the last whole entry: a torn tail is overwritten.
  const uint64_t next = merged->size();
  std::string out;
  if (next == 0) {
    out = std::string(kStepsMagic, 8);
    AppendLittleEndian(run->canonical_replicas, 4, &out);
  }
  uint64_t j = next;
  for (; j < through; ++j) {
    bool complete = true;
    for (uint32_t lane = 0; lane < run->canonical_replicas && complete; ++lane) {
      complete = run->batches.count({lane, j}) > 0;
    }
    if (!complete) break;
    AppendLittleEndian(j, 8, &out);
    out += RoundDigest(*run, j);
  }
  const off_t at = static_cast<off_t>(next == 0 ? 0 : kHeaderBytes + next * kEntryBytes);
  bool ok = ftruncate(fd, at) == 0;
  size_t done = 0;
  while (ok && done < out.size()) {
    const ssize_t n = pwrite(fd, out.data() + done, out.size() - done, at + done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<size_t>(n);
  }
  ok = ok && fdatasync(fd) == 0;
  const int err = errno;
  close(fd);
  if (!ok) {
    return absl::InternalError(absl::StrCat("cannot write ", path, ": ", std::strerror(err)));
  }
  return j;
}

StepMerger::StepMerger() : thread_([this] { Run(); }) {}

StepMerger::~StepMerger() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void StepMerger::Enqueue(const std::string& dir, uint64_t through) {
  absl::MutexLock lock(&mu_);
  for (auto& [queued, bound] : queue_) {
    if (queued == dir) {
      bound = std::max(bound, through);
      return;
    }
  }
  queue_.emplace_back(dir, through);
}

void StepMerger::Drain() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](StepMerger* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(m->mu_) {
        return m->queue_.empty() && !m->busy_;
      },
      this));
}

void StepMerger::Run() {
  while (true) {
    std::pair<std::string, uint64_t> job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](StepMerger* m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(m->mu_) {
            return m->stopping_ || !m->queue_.empty();
          },
          this));
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    absl::StatusOr<uint64_t> merged = MergeSteps(job.first, job.second);
    if (merged.ok()) {
      SubsystemLogger("audit")->info("merged {} lane rounds of {} into {}/{}", *merged,
                                     job.first, job.first, kStepsFile);
    } else {
      SubsystemLogger("audit")->warn("cannot merge the audit logs of {}: {}", job.first,
                                     merged.status().ToString());
    }
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

}  // namespace zephon::audit
