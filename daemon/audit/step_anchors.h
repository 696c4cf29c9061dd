// Step anchors: where each lane of a spec stood every few thousand records, kept in the
// node's cache directory so that `zephonctl which` finds any step a run of the spec
// reached without counting the run's flush groups from its start (docs/provenance.md).
//
// An anchor says "lane L's flush group starting at lane chunk c begins at the lane's
// record r" (stored as an AuditRecord with the lane, a lane batch b that starts in that
// group and its records_into_group = b*M - r; no digest, no sample ids). It is a pure
// function of the spec (its hash covers the options and the datasets' contents), so
// every run of the spec, on any dp_degree, writes and reads the same directory:
// <cache_dir>/anchors/<spec hash>/ (and a named run with a local aggregate_dir also
// <aggregate_dir>/<run_id>/anchors/<spec hash>/), files as AuditLog's. Anchors are a cache: a lane
// gets one only where none lies within the `every_records` records before it (what
// earlier runs or queries left counts), so rerunning a spec writes nothing new, and a
// query replays fewer than `every_records` records' flush groups from its anchor.
//
// Thread-safety: StepAnchorWriter is thread-compatible (one producer thread notes).
#ifndef ZEPHON_DAEMON_AUDIT_STEP_ANCHORS_H_
#define ZEPHON_DAEMON_AUDIT_STEP_ANCHORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "daemon/audit/audit_log.h"

namespace zephon::audit {

inline constexpr uint64_t kAnchorEveryRecords = 4096;

// <dir>/anchors/<spec_hash>: `dir` is a node's cache directory, or a named run's
// directory under a local aggregate_dir (<aggregate_dir>/<run_id>, shared by its nodes).
std::string StepAnchorDir(const std::string& dir, const std::string& spec_hash);

// The spec (and, for the curious reader of a file, the writer) its anchors belong to.
struct AnchorOrigin {
  std::string run_id;
  std::string writer;  // an instance id, or "zephonctl"
  std::string spec_hash;
  uint32_t canonical_replicas = 0;
};

class StepAnchorWriter {
 public:
  // Nothing is read or created before the first Note that has an anchor to write.
  // REQUIRES: flush_every_k_chunks, microbatch_size, every_records >= 1.
  StepAnchorWriter(std::string dir, AnchorOrigin origin, uint64_t flush_every_k_chunks,
                   uint64_t microbatch_size, uint64_t every_records = kAnchorEveryRecords);
  StepAnchorWriter(const StepAnchorWriter&) = delete;
  StepAnchorWriter& operator=(const StepAnchorWriter&) = delete;

  // Lane `lane`'s batch `lane_batch` starts `records_into_group` records into the flush
  // group at lane chunk `flush_group_chunk`. Appends an anchor for that group unless
  // the directory (read once, at the first anchor) or this writer already holds one
  // within every_records records before the group's start. Errors: those of reading the
  // directory or of AuditLog::Open/Append (the caller may drop the writer: anchors only
  // save time); INVALID_ARGUMENT for a position no batch can have.
  absl::Status Note(uint32_t lane, uint64_t lane_batch, uint64_t flush_group_chunk,
                    uint64_t records_into_group);

  // Anchors appended so far.
  uint64_t written() const { return written_; }
  const std::string& dir() const { return dir_; }

 private:
  absl::Status LoadExisting();

  const std::string dir_;
  const AnchorOrigin origin_;
  const uint64_t k_;
  const uint64_t m_;
  const uint64_t every_;
  bool loaded_ = false;
  // Per lane: the records at which anchored groups start; the group chunk last noted.
  std::map<uint32_t, std::set<uint64_t>> known_;
  std::map<uint32_t, uint64_t> last_group_chunk_;
  std::unique_ptr<AuditLog> log_;
  uint64_t written_ = 0;
};

}  // namespace zephon::audit

#endif  // ZEPHON_DAEMON_AUDIT_STEP_ANCHORS_H_
