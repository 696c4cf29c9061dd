// AuditLog: an append-only, crash-safe log of the batches one instance published
// (proto::AuditRecord), in files "<stem>.<NNNNNN>.zaudit" of one directory, rotated by
// size; ReadAuditDir reads every such file of a directory back.
//
// File format (version 1): the 8 bytes "ZAUDIT01", then records, each
//   u32 length (little-endian) | u64 HashBytes(payload) (little-endian) | payload
// with payload a serialized AuditRecord. A record is one write() to a file opened
// O_APPEND, so a crash leaves at most the last record torn; readers skip a torn tail
// (a frame that runs past the end of the file, or the file's last frame failing its
// hash) and refuse a bad frame with records after it (DATA_LOSS naming file and offset).
// Files are synced (fdatasync) when rotated and by Sync().
//
// Thread-safety: AuditLog is thread-compatible (the producer thread appends; Sync from
// any thread needs external synchronization). ReadAuditDir is a pure function.
#ifndef ZEPHON_DAEMON_AUDIT_AUDIT_LOG_H_
#define ZEPHON_DAEMON_AUDIT_AUDIT_LOG_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/audit.pb.h"

namespace zephon::audit {

inline constexpr char kAuditMagic[] = "ZAUDIT01";  // 8 bytes, no terminator written
inline constexpr char kAuditSuffix[] = ".zaudit";
inline constexpr uint64_t kDefaultRotateBytes = uint64_t{64} << 20;

class AuditLog {
 public:
  // Creates `dir` (and parents, mode 0750) if needed and starts file <stem>.000000 (or
  // the first index not taken: a restarted daemon never appends to an older file).
  // `stem` becomes part of a file name: characters other than [A-Za-z0-9._-] are
  // replaced by '_'. Errors name the directory or file and the fix.
  static absl::StatusOr<std::unique_ptr<AuditLog>> Open(const std::string& dir,
                                                        const std::string& stem,
                                                        uint64_t rotate_bytes =
                                                            kDefaultRotateBytes);
  ~AuditLog();  // syncs and closes
  AuditLog(const AuditLog&) = delete;
  AuditLog& operator=(const AuditLog&) = delete;

  // Appends one record (rotating first when the file reached rotate_bytes).
  absl::Status Append(const proto::AuditRecord& record);
  // fdatasync of the current file.
  absl::Status Sync();
  // The file being written.
  const std::string& path() const { return path_; }

 private:
  AuditLog(std::string dir, std::string stem, uint64_t rotate_bytes)
      : dir_(std::move(dir)), stem_(std::move(stem)), rotate_bytes_(rotate_bytes) {}
  // Opens the first free index at or after next_index_.
  absl::Status OpenNext();

  const std::string dir_;
  const std::string stem_;
  const uint64_t rotate_bytes_;
  uint64_t next_index_ = 0;
  int fd_ = -1;
  uint64_t bytes_ = 0;  // in the current file
  std::string path_;
};

// Where a run's logs go: <aggregate_dir>/<run>/audit for audit=True, <audit_dir>/<run>
// for zephond --audit-dir. One definition for the instances that write there and the
// checkpoint leader that merges them.
std::string AggregateAuditDir(const std::string& aggregate_dir, const std::string& run);
std::string DaemonAuditDir(const std::string& audit_dir, const std::string& run);

// What a user names as a run's audit directory: `dir` itself, or `dir`/audit when that
// is a directory (the run's own directory was named).
std::string ResolveAuditDir(const std::string& dir);

// The records of one file, in order. `torn_tail` (may be null) is set when a torn last
// record was skipped. Errors: NOT_FOUND / PERMISSION_DENIED naming the file;
// DATA_LOSS for a wrong magic or a bad record followed by more data.
absl::StatusOr<std::vector<proto::AuditRecord>> ReadAuditFile(const std::string& path,
                                                              bool* torn_tail = nullptr);

// Every *.zaudit file directly in `dir` (sorted by name), concatenated. Errors: those
// of ReadAuditFile; NOT_FOUND when `dir` does not exist or holds no audit file.
absl::StatusOr<std::vector<proto::AuditRecord>> ReadAuditDir(const std::string& dir);
// The same, one record at a time (memory: one file, at most its rotation size).
absl::Status ForEachAuditRecord(const std::string& dir,
                                const std::function<void(proto::AuditRecord)>& visit);

}  // namespace zephon::audit

#endif  // ZEPHON_DAEMON_AUDIT_AUDIT_LOG_H_
