#include "daemon/audit/step_merge.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <map>
#include <string_view>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "common/file_io.h"
#include "common/little_endian.h"
#include "common/logging.h"
#include "daemon/audit/audit_log.h"

namespace zephon::audit {
namespace {

constexpr char kStepsMagic[] = "ZSTEPS02";
constexpr size_t kHeaderBytes = 28;  // magic, u32 C, the spec hash (16 characters)
constexpr size_t kSpecHashBytes = 16;

// u64 lane round, 32-byte digest, and a {u64, u64} start position per lane.
size_t EntryBytes(uint32_t lanes) { return 40 + 16 * size_t{lanes}; }

MergedRound ParseEntry(const char* p, uint32_t lanes) {
  MergedRound r{LoadLittleEndian(p, 8), std::string(p + 8, 32), {}};
  for (uint32_t l = 0; l < lanes; ++l) {
    r.starts.emplace_back(LoadLittleEndian(p + 40 + 16 * l, 8),
                          LoadLittleEndian(p + 48 + 16 * l, 8));
  }
  return r;
}

// What lane round j's digest covers of one lane's batch j: its token digest, then its
// sample ids as u64 little-endian.
std::string DigestInput(const proto::AuditRecord& r) {
  std::string bytes = r.token_sha256();
  for (uint64_t id : r.sample_ids()) AppendLittleEndian(id, 8, &bytes);
  return bytes;
}

}  // namespace

absl::StatusOr<std::vector<MergedRound>> ReadMergedSteps(const std::string& dir,
                                                         uint32_t* canonical_replicas) {
  const std::string path = absl::StrCat(dir, "/", kStepsFile);
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (absl::IsNotFound(bytes.status())) return std::vector<MergedRound>();
  if (!bytes.ok()) return bytes.status();
  // A crash between creating the file and writing its header leaves fewer bytes: no
  // entries yet (the next merge writes the header).
  if (bytes->size() < kHeaderBytes &&
      std::string(kStepsMagic).compare(0, std::min<size_t>(bytes->size(), 8), *bytes, 0,
                                       std::min<size_t>(bytes->size(), 8)) == 0) {
    return std::vector<MergedRound>();
  }
  if (bytes->size() < kHeaderBytes || bytes->compare(0, 8, kStepsMagic) != 0) {
    return absl::DataLossError(absl::StrCat(path, " is not a merged steps file (no ",
                                            kStepsMagic, " header)"));
  }
  const uint32_t lanes = static_cast<uint32_t>(LoadLittleEndian(bytes->data() + 8, 4));
  if (canonical_replicas != nullptr) *canonical_replicas = lanes;
  std::vector<MergedRound> out;
  const size_t entry = EntryBytes(lanes);
  for (size_t at = kHeaderBytes; at + entry <= bytes->size(); at += entry) {
    out.push_back(ParseEntry(bytes->data() + at, lanes));
  }
  return out;  // a torn last entry (shorter than an entry) is not one
}

absl::StatusOr<std::optional<MergedRound>> ReadMergedRound(const std::string& dir, uint64_t j,
                                                           std::string* spec_hash) {
  const std::string path = absl::StrCat(dir, "/", kStepsFile);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::optional<MergedRound>();
  char header[kHeaderBytes];
  std::optional<MergedRound> out;
  absl::Status status;
  if (pread(fd, header, kHeaderBytes, 0) == static_cast<ssize_t>(kHeaderBytes)) {
    if (std::string_view(header, 8) != std::string_view(kStepsMagic, 8)) {
      status = absl::DataLossError(absl::StrCat(path, " is not a merged steps file"));
    } else {
      const uint32_t lanes = static_cast<uint32_t>(LoadLittleEndian(header + 8, 4));
      if (spec_hash != nullptr) *spec_hash = std::string(header + 12, kSpecHashBytes);
      std::string entry(EntryBytes(lanes), '\0');
      const off_t at = static_cast<off_t>(kHeaderBytes + j * entry.size());
      if (pread(fd, entry.data(), entry.size(), at) == static_cast<ssize_t>(entry.size())) {
        out = ParseEntry(entry.data(), lanes);
        if (out->lane_round != j) {
          status = absl::DataLossError(absl::StrCat(path, " holds lane round ",
                                                    out->lane_round, " where ", j, " belongs"));
        }
      }
    }
  }
  close(fd);
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<uint64_t> MergeSteps(const std::string& dir, uint64_t through) {
  uint32_t c = 0;
  absl::StatusOr<std::vector<MergedRound>> merged = ReadMergedSteps(dir, &c);
  if (!merged.ok()) return merged.status();
  const uint64_t next = merged->size();
  // Only the lane rounds to merge now are kept (memory: the window, not the run).
  uint32_t lanes = 0;
  std::string hash;
  struct Batch {
    std::string digest_input;
    uint64_t group_chunk = 0, records_into_group = 0;
  };
  std::map<std::pair<uint64_t, uint32_t>, Batch> window;  // (j, lane)
  absl::Status read = ForEachAuditRecord(dir, [&](proto::AuditRecord r) {
    if (lanes == 0) {
      lanes = r.canonical_replicas();
      hash = r.spec_hash();
    }
    if (r.lane_batch_index() < next || r.lane_batch_index() >= through) return;
    window.try_emplace({r.lane_batch_index(), r.lane()},
                       Batch{DigestInput(r), r.flush_group_chunk(), r.records_into_group()});
  });
  if (!read.ok()) return read;
  if (lanes == 0) return next;  // no record yet: nothing to merge
  const std::string path = absl::StrCat(dir, "/", kStepsFile);
  if (next > 0 && c != lanes) {
    return absl::FailedPreconditionError(absl::StrCat(
        path, " merges ", c, " lanes but the run's audit records have ", lanes));
  }
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0640);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", path, ": ", std::strerror(errno)));
  }
  // Start right after the last whole entry: a torn tail is overwritten.
  std::string out;
  if (next == 0) {
    out = std::string(kStepsMagic, 8);
    AppendLittleEndian(lanes, 4, &out);
    hash.resize(kSpecHashBytes, ' ');
    out += hash;
  }
  uint64_t j = next;
  for (; j < through; ++j) {
    std::string round, starts;
    bool complete = true;
    for (uint32_t lane = 0; lane < lanes && complete; ++lane) {
      auto it = window.find({j, lane});
      complete = it != window.end();
      if (!complete) break;
      round += it->second.digest_input;
      AppendLittleEndian(it->second.group_chunk, 8, &starts);
      AppendLittleEndian(it->second.records_into_group, 8, &starts);
    }
    if (!complete) break;
    AppendLittleEndian(j, 8, &out);
    out += Sha256(round);
    out += starts;
  }
  const off_t at = static_cast<off_t>(next == 0 ? 0 : kHeaderBytes + next * EntryBytes(lanes));
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
