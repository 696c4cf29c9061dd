#include "daemon/audit/step_anchors.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "proto/audit.pb.h"

namespace zephon::audit {

std::string StepAnchorDir(const std::string& dir, const std::string& spec_hash) {
  return absl::StrCat(dir, "/anchors/", spec_hash);
}

StepAnchorWriter::StepAnchorWriter(std::string dir, AnchorOrigin origin,
                                   uint64_t flush_every_k_chunks, uint64_t microbatch_size,
                                   uint64_t every_records)
    : dir_(std::move(dir)),
      origin_(std::move(origin)),
      k_(flush_every_k_chunks),
      m_(microbatch_size),
      every_(every_records) {}

absl::Status StepAnchorWriter::LoadExisting() {
  absl::Status read = ForEachAuditRecord(dir_, [this](proto::AuditRecord r) {
    if (r.spec_hash() != origin_.spec_hash ||
        r.canonical_replicas() != origin_.canonical_replicas ||
        r.records_into_group() > r.lane_batch_index() * m_) {
      return;
    }
    known_[r.lane()].insert(r.lane_batch_index() * m_ - r.records_into_group());
  });
  // No directory, or no file in it yet: nothing anchored.
  if (!read.ok() && !absl::IsNotFound(read)) return read;
  loaded_ = true;
  return absl::OkStatus();
}

absl::Status StepAnchorWriter::Note(uint32_t lane, uint64_t lane_batch,
                                    uint64_t flush_group_chunk, uint64_t records_into_group) {
  if (flush_group_chunk % k_ != 0 || records_into_group > lane_batch * m_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lane ", lane, " batch ", lane_batch, " cannot start ", records_into_group,
        " records into the flush group at chunk ", flush_group_chunk,
        " (flush_every_k_chunks ", k_, ", microbatch_size ", m_, ")"));
  }
  // Only a group's first batch here is looked at: the rest start in the same group.
  auto last = last_group_chunk_.find(lane);
  if (last != last_group_chunk_.end() && last->second == flush_group_chunk) {
    return absl::OkStatus();
  }
  last_group_chunk_[lane] = flush_group_chunk;
  const uint64_t group_start = lane_batch * m_ - records_into_group;
  if (!loaded_) {
    if (absl::Status s = LoadExisting(); !s.ok()) return s;
  }
  std::set<uint64_t>& known = known_[lane];
  const uint64_t window_start = group_start >= every_ ? group_start - every_ + 1 : 0;
  auto near = known.lower_bound(window_start);
  if (near != known.end() && *near <= group_start) return absl::OkStatus();
  if (log_ == nullptr) {
    absl::StatusOr<std::unique_ptr<AuditLog>> opened = AuditLog::Open(dir_, origin_.writer);
    if (!opened.ok()) return opened.status();
    log_ = *std::move(opened);
  }
  proto::AuditRecord record;
  record.set_run_id(origin_.run_id);
  record.set_instance_id(origin_.writer);
  record.set_spec_hash(origin_.spec_hash);
  record.set_canonical_replicas(origin_.canonical_replicas);
  record.set_lane(lane);
  record.set_lane_batch_index(lane_batch);
  record.set_flush_group_chunk(flush_group_chunk);
  record.set_records_into_group(records_into_group);
  if (absl::Status appended = log_->Append(record); !appended.ok()) return appended;
  known.insert(group_start);
  ++written_;
  return absl::OkStatus();
}

}  // namespace zephon::audit
