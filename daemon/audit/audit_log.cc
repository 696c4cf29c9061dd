#include "daemon/audit/audit_log.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/file_io.h"
#include "common/little_endian.h"
#include "common/mix.h"

namespace zephon::audit {
namespace {

constexpr size_t kMagicBytes = 8;
constexpr size_t kFrameHeaderBytes = 12;  // u32 length + u64 hash
// A record bigger than this is not one of ours (a batch lists at most rows x cols ids).
constexpr uint32_t kMaxRecordBytes = 256u << 20;

std::string Sanitized(const std::string& stem) {
  std::string out = stem;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) c = '_';
  }
  return out.empty() ? std::string("audit") : out;
}

absl::Status Errno(const std::string& what, int err) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOENT) return absl::NotFoundError(message);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(message);
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(message);
  return absl::InternalError(message);
}

absl::Status WriteAll(int fd, const std::string& bytes, const std::string& path) {
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno(absl::StrCat("cannot append to the audit log ", path), errno);
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

std::string AggregateAuditDir(const std::string& aggregate_dir, const std::string& run) {
  return absl::StrCat(aggregate_dir, "/", run, "/audit");
}

std::string DaemonAuditDir(const std::string& audit_dir, const std::string& run) {
  return absl::StrCat(audit_dir, "/", run);
}

std::string ResolveAuditDir(const std::string& dir) {
  struct stat st;
  const std::string nested = dir + "/audit";
  return stat(nested.c_str(), &st) == 0 && S_ISDIR(st.st_mode) ? nested : dir;
}

absl::StatusOr<std::unique_ptr<AuditLog>> AuditLog::Open(const std::string& dir,
                                                         const std::string& stem,
                                                         uint64_t rotate_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create the audit directory ", dir, ": ", ec.message(),
        "; point --audit-dir (or aggregate_dir) at a writable directory"));
  }
  std::unique_ptr<AuditLog> log(
      new AuditLog(dir, Sanitized(stem), std::max<uint64_t>(rotate_bytes, 4096)));
  if (absl::Status s = log->OpenNext(); !s.ok()) return s;
  return log;
}

AuditLog::~AuditLog() {
  if (fd_ >= 0) {
    (void)Sync();
    close(fd_);
  }
}

absl::Status AuditLog::OpenNext() {
  if (fd_ >= 0) {
    absl::Status synced = Sync();
    close(fd_);
    fd_ = -1;
    if (!synced.ok()) return synced;
  }
  for (;; ++next_index_) {
    path_ = absl::StrCat(dir_, "/", stem_, absl::StrFormat(".%06d", next_index_), kAuditSuffix);
    // O_EXCL: never append to a file another (or an earlier) writer started.
    fd_ = open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC | O_NOFOLLOW,
               0640);
    if (fd_ >= 0) break;
    if (errno != EEXIST) return Errno(absl::StrCat("cannot create the audit log ", path_), errno);
  }
  ++next_index_;
  bytes_ = 0;
  const std::string magic(kAuditMagic, kMagicBytes);
  if (absl::Status s = WriteAll(fd_, magic, path_); !s.ok()) return s;
  bytes_ = kMagicBytes;
  return absl::OkStatus();
}

absl::Status AuditLog::Append(const proto::AuditRecord& record) {
  if (bytes_ >= rotate_bytes_) {
    if (absl::Status s = OpenNext(); !s.ok()) return s;
  }
  std::string payload;
  record.SerializeToString(&payload);
  std::string frame;
  frame.reserve(kFrameHeaderBytes + payload.size());
  AppendLittleEndian(payload.size(), 4, &frame);
  AppendLittleEndian(HashBytes(payload), 8, &frame);
  frame += payload;
  if (absl::Status s = WriteAll(fd_, frame, path_); !s.ok()) return s;
  bytes_ += frame.size();
  return absl::OkStatus();
}

absl::Status AuditLog::Sync() {
  if (fd_ >= 0 && fdatasync(fd_) != 0) {
    return Errno(absl::StrCat("cannot sync the audit log ", path_), errno);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<proto::AuditRecord>> ReadAuditFile(const std::string& path,
                                                              bool* torn_tail) {
  if (torn_tail != nullptr) *torn_tail = false;
  absl::StatusOr<std::string> bytes = ReadFile(path);
  if (!bytes.ok()) return bytes.status();
  const std::string& b = *bytes;
  if (b.size() < kMagicBytes || b.compare(0, kMagicBytes, kAuditMagic, kMagicBytes) != 0) {
    if (b.size() < kMagicBytes && std::string(kAuditMagic).rfind(b, 0) == 0) {
      if (torn_tail != nullptr) *torn_tail = !b.empty();
      return std::vector<proto::AuditRecord>();  // a crash right after creating it
    }
    return absl::DataLossError(absl::StrCat(path, " is not a zephond audit log (no ",
                                            kAuditMagic, " header)"));
  }
  std::vector<proto::AuditRecord> out;
  size_t at = kMagicBytes;
  while (at < b.size()) {
    const size_t left = b.size() - at;
    bool bad = left < kFrameHeaderBytes;
    uint64_t length = 0;
    if (!bad) {
      length = LoadLittleEndian(b.data() + at, 4);
      bad = length > kMaxRecordBytes || left - kFrameHeaderBytes < length;
    }
    proto::AuditRecord record;
    if (!bad) {
      const std::string_view payload(b.data() + at + kFrameHeaderBytes, length);
      bad = HashBytes(payload) != LoadLittleEndian(b.data() + at + 4, 8) ||
            !record.ParseFromArray(payload.data(), static_cast<int>(payload.size()));
    }
    if (bad) {
      // A frame that runs off the end, or a bad last frame, is a torn append.
      const bool last = left < kFrameHeaderBytes || left - kFrameHeaderBytes <= length;
      if (last) {
        if (torn_tail != nullptr) *torn_tail = true;
        break;
      }
      return absl::DataLossError(absl::StrCat("audit log ", path, " has a damaged record at byte ",
                                              at, " with ", left, " bytes after it"));
    }
    out.push_back(std::move(record));
    at += kFrameHeaderBytes + length;
  }
  return out;
}

absl::Status ForEachAuditRecord(const std::string& dir,
                                const std::function<void(proto::AuditRecord)>& visit) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return Errno(absl::StrCat("cannot list the audit directory ", dir), errno);
  std::vector<std::string> files;
  const std::string suffix = kAuditSuffix;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name.size() > suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      files.push_back(name);
    }
  }
  closedir(d);
  if (files.empty()) {
    return absl::NotFoundError(absl::StrCat("no audit log (*", kAuditSuffix, ") in ", dir,
                                            ": was the run started with audit=True or "
                                            "zephond --audit-dir?"));
  }
  std::sort(files.begin(), files.end());
  for (const std::string& f : files) {
    absl::StatusOr<std::vector<proto::AuditRecord>> records = ReadAuditFile(dir + "/" + f);
    if (!records.ok()) return records.status();
    for (proto::AuditRecord& r : *records) visit(std::move(r));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<proto::AuditRecord>> ReadAuditDir(const std::string& dir) {
  std::vector<proto::AuditRecord> out;
  absl::Status read =
      ForEachAuditRecord(dir, [&out](proto::AuditRecord r) { out.push_back(std::move(r)); });
  if (!read.ok()) return read;
  return out;
}

}  // namespace zephon::audit
