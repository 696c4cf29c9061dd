#include "daemon/audit/step_merge.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <map>
#include <optional>
#include <string_view>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "common/digest.h"
#include "common/file_io.h"
#include "common/little_endian.h"
#include "common/logging.h"
#include "common/status_macros.h"
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

// A steps file's header, and the whole entries the file holds.
struct Header {
  uint32_t lanes = 0;
  std::string spec_hash;
  uint64_t entries = 0;
};

// The header of `path` from its first bytes `head` (at most kHeaderBytes) and its size;
// nullopt for a file cut before its header ends (a crash right after creating it: no
// entries yet). DATA_LOSS for a file that is not a steps file.
absl::StatusOr<std::optional<Header>> ParseHeader(std::string_view head, uint64_t size,
                                                  const std::string& path) {
  const size_t magic = std::min<size_t>(head.size(), 8);
  if (head.substr(0, magic) != std::string_view(kStepsMagic, magic)) {
    return absl::DataLossError(absl::StrCat(path, " is not a merged steps file (no ",
                                            kStepsMagic, " header)"));
  }
  if (head.size() < kHeaderBytes) return std::optional<Header>();
  Header h;
  h.lanes = static_cast<uint32_t>(LoadLittleEndian(head.data() + 8, 4));
  h.spec_hash = std::string(head.substr(12, kSpecHashBytes));
  h.entries = (size - kHeaderBytes) / EntryBytes(h.lanes);  // a torn last entry is not one
  return std::optional<Header>(std::move(h));
}

// The header of the steps file at `path` read through `fd`.
absl::StatusOr<std::optional<Header>> ReadHeader(int fd, const std::string& path) {
  char head[kHeaderBytes];
  const ssize_t n = pread(fd, head, kHeaderBytes, 0);
  struct stat st;
  if (n < 0 || fstat(fd, &st) != 0) {
    return absl::InternalError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  return ParseHeader(std::string_view(head, static_cast<size_t>(n)),
                     static_cast<uint64_t>(st.st_size), path);
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
  ASSIGN_OR_RETURN(
      std::optional<Header> header,
      ParseHeader(std::string_view(*bytes).substr(0, kHeaderBytes), bytes->size(), path));
  std::vector<MergedRound> out;
  if (!header.has_value()) return out;
  if (canonical_replicas != nullptr) *canonical_replicas = header->lanes;
  const size_t entry = EntryBytes(header->lanes);
  for (uint64_t j = 0; j < header->entries; ++j) {
    out.push_back(ParseEntry(bytes->data() + kHeaderBytes + j * entry, header->lanes));
  }
  return out;
}

absl::StatusOr<std::optional<MergedRound>> ReadMergedRound(const std::string& dir, uint64_t j,
                                                           std::string* spec_hash) {
  const std::string path = absl::StrCat(dir, "/", kStepsFile);
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return std::optional<MergedRound>();
  absl::StatusOr<std::optional<Header>> header = ReadHeader(fd, path);
  std::optional<MergedRound> out;
  absl::Status status = header.status();
  if (header.ok() && header->has_value() && j < (*header)->entries) {
    const uint32_t lanes = (*header)->lanes;
    if (spec_hash != nullptr) *spec_hash = (*header)->spec_hash;
    std::string entry(EntryBytes(lanes), '\0');
    const off_t at = static_cast<off_t>(kHeaderBytes + j * entry.size());
    if (pread(fd, entry.data(), entry.size(), at) == static_cast<ssize_t>(entry.size())) {
      out = ParseEntry(entry.data(), lanes);
      if (out->lane_round != j) {
        status = absl::DataLossError(absl::StrCat(path, " holds lane round ", out->lane_round,
                                                  " where ", j, " belongs"));
      }
    }
  }
  close(fd);
  if (!status.ok()) return status;
  return out;
}

absl::StatusOr<uint64_t> MergeSteps(const std::string& dir, uint64_t through) {
  const std::string path = absl::StrCat(dir, "/", kStepsFile);
  // Where the file ends: its header and size, not its entries (read once per round).
  uint32_t c = 0;
  uint64_t next = 0;
  if (const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW); fd >= 0) {
    absl::StatusOr<std::optional<Header>> header = ReadHeader(fd, path);
    close(fd);
    if (!header.ok()) return header.status();
    if (header->has_value()) {
      c = (*header)->lanes;
      next = (*header)->entries;
    }
  }
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
