#include "daemon/pipeline/batching/lane_stream.h"

#include <algorithm>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/mix.h"
#include "common/status_macros.h"
#include "daemon/pipeline/ordering/shuffle_buffer.h"
#include "daemon/pipeline/spec_string_form.h"

namespace zephon::pipeline {
namespace {

struct SampleIdHash {
  size_t operator()(const SampleId& id) const {
    return Combine(Combine(id.dataset, id.shard), id.index);
  }
};

}  // namespace

absl::StatusOr<LaneOptions> LaneOptions::FromSpec(const proto::PipelineSpec& spec) {
  LaneOptions o;
  RETURN_IF_ERROR(CheckCanonicalReplicas(spec.canonical_replicas()));
  o.num_lanes = spec.canonical_replicas();
  // Defaults are ResolvePipeline's job; here they are only checked.
  RETURN_IF_ERROR(CheckResolved(spec.lane_routing()));
  o.routing = spec.lane_routing();
  o.routing_seed = spec.work_source().seed();
  if (spec.flush_every_k_chunks() == 0) {
    return absl::InvalidArgumentError(
        "flush_every_k_chunks is 0 in a resolved spec (ResolvePipeline sets the default)");
  }
  o.flush_every_k_chunks = spec.flush_every_k_chunks();
  const auto& ops = spec.operators();
  int i = 0;
  // tokenize (checked by ResolveTokenize) turns text into samples before the lanes:
  // nothing here depends on it.
  if (i < ops.size() && ops[i].has_tokenize()) ++i;
  for (int k = i; k < ops.size(); ++k) {
    if (ops[k].has_tokenize()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "operators[", k, "]: tokenize must be the first operator (operators are "
          "[tokenize], [shuffle], pack_flat, batch)"));
    }
  }
  if (i < ops.size() && ops[i].has_shuffle()) {
    o.shuffle_buffer_size = ops[i].shuffle().buffer_size();
    o.shuffle_seed = ops[i].shuffle().seed();
    if (o.shuffle_buffer_size < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("operators[", i, "] shuffle.buffer_size must be >= 1, got 0"));
    }
    ++i;
  }
  if (i >= ops.size() || !ops[i].has_pack_flat()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "operators[", i, "]: expected pack_flat (operators are [tokenize], [shuffle], pack_flat, batch)"));
  }
  const auto& pack = ops[i].pack_flat();
  if (pack.max_length() < 2) {
    return absl::InvalidArgumentError(absl::StrCat("operators[", i,
                                                   "] pack_flat.max_length must be >= 2, got ",
                                                   pack.max_length()));
  }
  if (!pack.algorithm().empty() && pack.algorithm() != "wrap") {
    return absl::InvalidArgumentError(absl::StrCat(
        "operators[", i, "] pack_flat.algorithm '", pack.algorithm(), "' unknown (wrap)"));
  }
  o.max_length = pack.max_length();
  o.emit_positions = !pack.has_emit_positions() || pack.emit_positions();
  ++i;
  if (i >= ops.size() || !ops[i].has_batch()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "operators[", i, "]: expected batch (operators are [tokenize], [shuffle], pack_flat, batch)"));
  }
  if (ops[i].batch().microbatch_size() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("operators[", i, "] batch.microbatch_size must be >= 1, got 0"));
  }
  o.microbatch_size = ops[i].batch().microbatch_size();
  o.drop_last = ops[i].batch().drop_last();
  ++i;
  if (i < ops.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "operators[", i, "]: nothing may follow batch (operators are [tokenize], [shuffle], pack_flat, batch)"));
  }
  return o;
}

std::string LaneOptions::Describe() const {
  std::string s;
  if (shuffle_buffer_size > 0) {
    s = absl::StrCat("shuffle(buffer_size=", shuffle_buffer_size, ", seed=", shuffle_seed,
                     ") -> ");
  }
  return absl::StrCat(s, "pack_flat(max_length=", max_length, ", wrap) -> batch(",
                      microbatch_size, ", drop_last=", drop_last ? "true" : "false",
                      "); flush every ", flush_every_k_chunks, " lane chunks");
}

LaneStream::LaneStream(std::shared_ptr<const WorkSource> source, const LaneOptions& options,
                       uint32_t lane)
    : source_(std::move(source)), options_(options), lane_(lane) {}

absl::StatusOr<std::unique_ptr<LaneStream>> LaneStream::Create(
    std::shared_ptr<const WorkSource> source, const LaneOptions& options, uint32_t lane,
    LanePosition start, uint64_t first_batch_index) {
  if (lane >= options.num_lanes) {
    return absl::InvalidArgumentError(
        absl::StrCat("lane ", lane, " must be < canonical_replicas ", options.num_lanes));
  }
  if (start.flush_group_chunk % options.flush_every_k_chunks != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lane ", lane, " position chunk ", start.flush_group_chunk,
        " is not a flush-group start (flush_every_k_chunks ", options.flush_every_k_chunks, ")"));
  }
  std::unique_ptr<LaneStream> s(new LaneStream(std::move(source), options, lane));
  s->group_chunk_ = start.flush_group_chunk;
  s->next_batch_index_ = first_batch_index;
  Record skipped;
  for (uint64_t r = 0; r < start.records_into_group; ++r) {
    if (!s->NextRecord(&skipped)) break;
  }
  // Skipping ran out of the group (or the lane) early: not a position of this lane.
  if (!(s->position() == start)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lane ", lane, " position {flush_group_chunk ", start.flush_group_chunk,
        ", records_into_group ", start.records_into_group,
        "} is beyond that flush group's records (a checkpoint of another spec?)"));
  }
  return s;
}

bool LaneStream::LoadGroup() {
  group_samples_.clear();
  std::vector<SampleId> chunk;
  const std::optional<uint64_t> num_chunks = source_->NumChunks();
  for (uint64_t c = group_chunk_; c < group_chunk_ + options_.flush_every_k_chunks; ++c) {
    const uint64_t g = GlobalChunkOfLane(lane_, c, options_.num_lanes, options_.routing,
                                         options_.routing_seed);
    if (num_chunks && g >= *num_chunks) break;  // Later lane chunks are later still.
    source_->Chunk(g, &chunk);
    group_samples_.insert(group_samples_.end(), chunk.begin(), chunk.end());
  }
  if (group_samples_.empty()) return false;
  if (options_.shuffle_buffer_size > 0) {
    BufferShuffle(options_.shuffle_buffer_size,
                  ShuffleKey(options_.shuffle_seed, lane_, group_chunk_), &group_samples_);
  }
  sample_cursor_ = 0;
  sample_offset_ = 0;
  records_in_group_ = 0;
  group_loaded_ = true;
  return true;
}

bool LaneStream::NextRecord(Record* record) {
  const uint64_t max_length = options_.max_length;
  while (!ended_) {
    if (!group_loaded_ && !LoadGroup()) {
      ended_ = true;
      break;
    }
    record->segments.clear();
    record->sample_ids.clear();
    uint64_t filled = 0;
    while (filled < max_length && sample_cursor_ < group_samples_.size()) {
      const SampleId id = group_samples_[sample_cursor_];
      const Dataset& ds = *source_->datasets()[id.dataset];
      const uint64_t length = ds.SampleLength(id.shard, id.index);
      const uint64_t take = std::min(length - sample_offset_, max_length - filled);
      if (take > 0) {
        record->segments.push_back(Segment{id, sample_offset_, take});
        filled += take;
        if (record->sample_ids.empty() || record->sample_ids.back() != id) {
          record->sample_ids.push_back(id);
        }
      }
      sample_offset_ += take;
      if (sample_offset_ == length) {
        ++sample_cursor_;
        sample_offset_ = 0;
      }
    }
    if (filled == max_length) {
      ++records_in_group_;
      return true;
    }
    // Group exhausted with a partial record: drop it and move to the next group.
    dropped_tokens_ += filled;
    group_loaded_ = false;
    group_chunk_ += options_.flush_every_k_chunks;
    records_in_group_ = 0;  // Keeps position() exact if the lane ends here.
  }
  return false;
}

absl::StatusOr<std::optional<BatchPlan>> LaneStream::NextPlan() {
  BatchPlan plan;
  plan.lane = lane_;
  plan.cols = static_cast<uint32_t>(options_.max_length);
  plan.start = position();
  std::unordered_set<SampleId, SampleIdHash> seen;
  Record record;
  while (plan.rows < options_.microbatch_size) {
    if (plan.rows == 0) plan.start = position();
    if (!NextRecord(&record)) break;
    plan.segments.insert(plan.segments.end(), record.segments.begin(), record.segments.end());
    for (const SampleId& id : record.sample_ids) {
      if (seen.insert(id).second) plan.sample_ids.push_back(id);
    }
    ++plan.rows;
  }
  if (plan.rows == 0 || (plan.rows < options_.microbatch_size && options_.drop_last)) {
    return std::optional<BatchPlan>();
  }
  plan.end = position();
  plan.lane_batch_index = next_batch_index_++;
  return std::optional<BatchPlan>(std::move(plan));
}

absl::StatusOr<std::optional<Batch>> LaneStream::Next() {
  ASSIGN_OR_RETURN(std::optional<BatchPlan> plan, NextPlan());
  if (!plan.has_value()) return std::optional<Batch>();
  ASSIGN_OR_RETURN(Batch batch, Materialize(*plan, source_->datasets()));
  return std::optional<Batch>(std::move(batch));
}

absl::Status MaterializeInto(const BatchPlan& plan,
                             const std::vector<std::shared_ptr<const Dataset>>& datasets,
                             int32_t* tokens, int32_t* positions) {
  const uint64_t cells = static_cast<uint64_t>(plan.rows) * plan.cols;
  uint64_t filled = 0;
  for (const Segment& seg : plan.segments) {
    const SampleId& id = seg.id;
    if (id.dataset >= datasets.size() || id.shard >= datasets[id.dataset]->NumShards() ||
        id.index >= datasets[id.dataset]->ShardSamples(id.shard) ||
        seg.offset + seg.count > datasets[id.dataset]->SampleLength(id.shard, id.index) ||
        filled + seg.count > cells) {
      return absl::InternalError(absl::StrCat(
          "batch plan of lane ", plan.lane, " batch ", plan.lane_batch_index,
          " names tokens [", seg.offset, ", ", seg.offset + seg.count, ") of sample ",
          id.dataset, "/", id.shard, "/", id.index, " beyond its datasets or its ", cells,
          " cells"));
    }
    const absl::Status read = datasets[id.dataset]->CopyTokens(id.shard, id.index, seg.offset,
                                                               seg.count, tokens + filled);
    if (!read.ok()) {
      // This message reaches the ranks as a ring's poison_detail (shm/ring_layout.h,
      // 1 KiB; cut there, while zephond logs the whole error): where in the batch, then
      // the reader's error (object URL, HTTP status) unchanged.
      return absl::Status(read.code(),
                          absl::StrCat("lane ", plan.lane, " batch ", plan.lane_batch_index,
                                       ", sample ", id.dataset, "/", id.shard, "/", id.index,
                                       " of '", datasets[id.dataset]->name(),
                                       "': ", read.message()));
    }
    if (positions != nullptr) {
      int32_t* p = positions + filled;
      for (uint64_t i = 0; i < seg.count; ++i) p[i] = static_cast<int32_t>(i);
    }
    filled += seg.count;
  }
  if (filled != cells) {
    return absl::InternalError(absl::StrCat("batch plan of lane ", plan.lane, " batch ",
                                            plan.lane_batch_index, " fills ", filled,
                                            " of its ", cells, " cells"));
  }
  return absl::OkStatus();
}

absl::StatusOr<Batch> Materialize(const BatchPlan& plan,
                                  const std::vector<std::shared_ptr<const Dataset>>& datasets) {
  Batch batch;
  batch.lane = plan.lane;
  batch.lane_batch_index = plan.lane_batch_index;
  batch.rows = plan.rows;
  batch.cols = plan.cols;
  batch.sample_ids = plan.sample_ids;
  batch.start = plan.start;
  batch.end = plan.end;
  const uint64_t cells = static_cast<uint64_t>(plan.rows) * plan.cols;
  batch.tokens.resize(cells);
  batch.positions.resize(cells);
  RETURN_IF_ERROR(MaterializeInto(plan, datasets, batch.tokens.data(), batch.positions.data()));
  return batch;
}

}  // namespace zephon::pipeline
