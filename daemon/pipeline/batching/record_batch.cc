#include "daemon/pipeline/batching/record_batch.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zephon::pipeline {
namespace {

absl::Status CheckPlan(const BatchPlan& plan, const Datasets& datasets) {
  if (!plan.records || plan.segments.size() != plan.rows ||
      plan.sample_ids.size() != plan.rows) {
    return absl::InternalError(absl::StrCat("batch plan of lane ", plan.lane, " batch ",
                                            plan.lane_batch_index, " is not a record plan of ",
                                            plan.rows, " rows"));
  }
  for (const Segment& seg : plan.segments) {
    const SampleId& id = seg.id;
    if (seg.padding || id.dataset >= datasets.size() ||
        id.shard >= datasets[id.dataset]->NumShards() ||
        id.index >= datasets[id.dataset]->ShardSamples(id.shard) || seg.offset != 0 ||
        seg.count != datasets[id.dataset]->SampleLength(id.shard, id.index)) {
      return absl::InternalError(absl::StrCat(
          "record plan of lane ", plan.lane, " batch ", plan.lane_batch_index, " names sample ",
          id.dataset, "/", id.shard, "/", id.index, " beyond its datasets"));
    }
    if (plan.payload && !datasets[id.dataset]->HasPayload()) {
      return absl::FailedPreconditionError(
          absl::StrCat("dataset '", datasets[id.dataset]->name(),
                       "' keeps no payloads (tokenize keep_payload needs a text dataset)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

RecordSizes RecordSizesOf(const BatchPlan& plan, const Datasets& datasets) {
  RecordSizes sizes;
  for (const Segment& seg : plan.segments) {
    sizes.tokens += seg.count;
    const SampleId& id = seg.id;
    if (plan.payload && id.dataset < datasets.size() &&
        id.shard < datasets[id.dataset]->NumShards() &&
        id.index < datasets[id.dataset]->ShardSamples(id.shard)) {
      sizes.payload_bytes += datasets[seg.id.dataset]->PayloadBytes(seg.id.shard, seg.id.index);
    }
  }
  return sizes;
}

absl::Status MaterializeRecordsInto(const BatchPlan& plan, const Datasets& datasets,
                                    const RecordCells& cells) {
  RETURN_IF_ERROR(CheckPlan(plan, datasets));
  uint64_t at = 0, payload_at = 0;
  std::string payload;
  cells.record_offsets[0] = 0;
  if (cells.payload_offsets != nullptr) cells.payload_offsets[0] = 0;
  for (uint32_t r = 0; r < plan.rows; ++r) {
    const Segment& seg = plan.segments[r];
    const Dataset& d = *datasets[seg.id.dataset];
    absl::Status s = d.CopyTokens(seg.id.shard, seg.id.index, 0, seg.count, cells.tokens + at);
    if (s.ok() && cells.loss_mask != nullptr) {
      s = d.CopyLossMask(seg.id.shard, seg.id.index, 0, seg.count, cells.loss_mask + at);
    }
    if (s.ok() && cells.payload != nullptr) {
      s = d.CopyPayload(seg.id.shard, seg.id.index, &payload);
      if (s.ok()) {
        std::copy(payload.begin(), payload.end(), cells.payload + payload_at);
        payload_at += payload.size();
      }
    }
    if (!s.ok()) return SampleReadError(plan, seg.id, datasets, s);
    at += seg.count;
    cells.record_offsets[r + 1] = static_cast<int64_t>(at);
    if (cells.payload_offsets != nullptr) {
      cells.payload_offsets[r + 1] = static_cast<int64_t>(payload_at);
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Batch> MaterializeRecords(const BatchPlan& plan, const Datasets& datasets) {
  RETURN_IF_ERROR(CheckPlan(plan, datasets));
  Batch batch;
  batch.lane = plan.lane;
  batch.lane_batch_index = plan.lane_batch_index;
  batch.rows = plan.rows;
  batch.cols = 0;
  batch.records = true;
  batch.sample_ids = plan.sample_ids;
  batch.chunk_ids.assign(plan.chunk_ids.begin(), plan.chunk_ids.end());
  batch.start = plan.start;
  batch.end = plan.end;
  const RecordSizes sizes = RecordSizesOf(plan, datasets);
  batch.tokens.resize(sizes.tokens);
  batch.record_offsets.resize(plan.rows + 1);
  if (plan.loss_mask) batch.loss_mask.resize(sizes.tokens);
  if (plan.payload) {
    batch.payload.resize(sizes.payload_bytes);
    batch.payload_offsets.resize(plan.rows + 1);
  }
  RecordCells cells;
  cells.tokens = batch.tokens.data();
  cells.record_offsets = batch.record_offsets.data();
  cells.loss_mask = plan.loss_mask ? batch.loss_mask.data() : nullptr;
  cells.payload = plan.payload ? batch.payload.data() : nullptr;
  cells.payload_offsets = plan.payload ? batch.payload_offsets.data() : nullptr;
  RETURN_IF_ERROR(MaterializeRecordsInto(plan, datasets, cells));
  return batch;
}

absl::Status SampleReadError(const BatchPlan& plan, const SampleId& id,
                             const Datasets& datasets, const absl::Status& read) {
  return absl::Status(read.code(), absl::StrCat("lane ", plan.lane, " batch ",
                                                plan.lane_batch_index, ", sample ", id.dataset,
                                                "/", id.shard, "/", id.index, " of '",
                                                datasets[id.dataset]->name(),
                                                "': ", read.message()));
}

RecordBounds LongestRecord(const Datasets& datasets, bool payload) {
  RecordBounds bounds;
  for (const auto& d : datasets) {
    for (uint32_t s = 0; s < d->NumShards(); ++s) {
      const ShardReader& shard = d->shard(s);
      for (uint64_t i = 0; i < shard.NumSamples(); ++i) {
        bounds.tokens = std::max(bounds.tokens, shard.SampleLength(i));
        if (payload) bounds.payload_bytes = std::max(bounds.payload_bytes, shard.PayloadBytes(i));
      }
    }
  }
  return bounds;
}

}  // namespace zephon::pipeline
