#include "daemon/pipeline/batching/lane_stream.h"

#include <algorithm>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "common/mix.h"
#include "common/status_macros.h"
#include "daemon/pipeline/batching/chain_spec.h"
#include "daemon/pipeline/batching/record_batch.h"
#include "daemon/pipeline/batching/segment_table.h"
#include "daemon/pipeline/ordering/shuffle_buffer.h"
#include "daemon/pipeline/spec_string_form.h"

namespace zephon::pipeline {
namespace {

// The packing knobs (packers.h) into *o, whose algorithm is set; unset = off.
absl::Status PackKnobsFromSpec(const proto::PackFlatSpec& pack, const std::string& op,
                               PackOptions* o) {
  const char* name = PackAlgorithmName(o->algorithm);
  const bool bins =
      o->algorithm == PackAlgorithm::kFirstFit || o->algorithm == PackAlgorithm::kBestFit;
  auto refuse = [&](const char* field, const char* takers) {
    return absl::InvalidArgumentError(absl::StrCat(op, ".", field, " applies to ", takers,
                                                   " only, not algorithm '", name,
                                                   "': remove it"));
  };
  if (pack.min_sequence_length() != 0) {
    if (!bins) return refuse("min_sequence_length", "first_fit and best_fit");
    if (pack.min_sequence_length() > pack.max_length()) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ".min_sequence_length must be in [1, max_length=", pack.max_length(), "], got ",
          pack.min_sequence_length()));
    }
    o->min_sequence_length = pack.min_sequence_length();
  }
  if (!pack.flush_strategy().empty()) {
    if (!bins) return refuse("flush_strategy", "first_fit and best_fit");
    absl::StatusOr<bool> fullest = ParseFlushFullest(pack.flush_strategy());
    if (!fullest.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(op, ".", fullest.status().message()));
    }
    o->flush_fullest = *fullest;
  }
  if (pack.max_sequences_per_bin() != 0) {
    if (!o->pads()) {
      return refuse("max_sequences_per_bin", "first_fit, best_fit and best_fit_wrap");
    }
    o->max_sequences_per_bin = pack.max_sequences_per_bin();
  }
  return absl::OkStatus();
}

// pack_flat's (or pack_sequences') algorithm and the fields it takes (packers.h); `op`
// names the operator ("operators[2] pack_flat").
absl::StatusOr<PackOptions> PackOptionsFromSpec(const proto::PackFlatSpec& pack,
                                                const std::string& op) {
  absl::StatusOr<PackAlgorithm> algorithm = ParsePackAlgorithm(pack.algorithm());
  if (!algorithm.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(op, ".", algorithm.status().message()));
  }
  PackOptions o;
  o.algorithm = *algorithm;
  o.max_length = pack.max_length();
  const char* name = PackAlgorithmName(o.algorithm);
  auto refuse = [&](const char* field, const char* takers) {
    return absl::InvalidArgumentError(absl::StrCat(op, ".", field, " applies to ", takers,
                                                   " only, not algorithm '", name,
                                                   "': remove it"));
  };
  if (!o.pads()) {
    if (pack.has_pad_token_id()) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ".pad_token_id: algorithm 'wrap' never pads (it drops each flush group's "
          "tail instead): remove pad_token_id, or pick first_fit, best_fit or best_fit_wrap"));
    }
  } else if (!pack.has_pad_token_id()) {
    return absl::InvalidArgumentError(absl::StrCat(
        op, ": algorithm '", name, "' pads its records and needs pad_token_id (the id "
        "written into pad cells, e.g. the tokenizer's pad or eos id)"));
  } else if (pack.pad_token_id() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(op, ".pad_token_id must be >= 0, got ", pack.pad_token_id()));
  }
  o.pad_token_id = pack.pad_token_id();
  const bool bins =
      o.algorithm == PackAlgorithm::kFirstFit || o.algorithm == PackAlgorithm::kBestFit;
  const bool pool = o.algorithm == PackAlgorithm::kBestFitWrap;
  if (bins) {
    if (pack.num_bins() < 1 || pack.num_bins() > kMaxNumBins) {
      return absl::InvalidArgumentError(
          absl::StrCat(op, ".num_bins must be in [1, ", kMaxNumBins, "] for algorithm '", name,
                       "' (the open bins kept per lane), got ", pack.num_bins()));
    }
    o.num_bins = pack.num_bins();
    o.drop_oversized = !pack.has_drop_oversized() || pack.drop_oversized();
  } else {
    if (pack.num_bins() != 0) return refuse("num_bins", "first_fit and best_fit");
    if (pack.has_drop_oversized()) return refuse("drop_oversized", "first_fit and best_fit");
  }
  if (pool) {
    if (pack.candidate_pool_size() < 1 || pack.candidate_pool_size() > kMaxCandidatePoolSize) {
      return absl::InvalidArgumentError(absl::StrCat(
          op, ".candidate_pool_size must be in [1, ", kMaxCandidatePoolSize, "], got ",
          pack.candidate_pool_size()));
    }
    if (pack.max_candidate_age() < 1) {
      return absl::InvalidArgumentError(absl::StrCat(op, ".max_candidate_age must be >= 1"));
    }
    o.candidate_pool_size = pack.candidate_pool_size();
    o.max_candidate_age = pack.max_candidate_age();
  } else {
    if (pack.candidate_pool_size() != 0) return refuse("candidate_pool_size", "best_fit_wrap");
    if (pack.max_candidate_age() != 0) return refuse("max_candidate_age", "best_fit_wrap");
  }
  RETURN_IF_ERROR(PackKnobsFromSpec(pack, op, &o));
  return o;
}

// "shuffle(buffer_size=.., seed=..)" as before algorithms existed, with the algorithm
// when it is not streaming.
std::string DescribeShuffle(const ShuffleOptions& o) {
  std::string s = absl::StrCat("shuffle(buffer_size=", o.buffer_size, ", seed=", o.seed);
  if (o.algorithm != ShuffleAlgorithm::kStreaming) {
    absl::StrAppend(&s, ", algorithm=", ShuffleAlgorithmName(o.algorithm));
  }
  if (o.algorithm == ShuffleAlgorithm::kBlockWarmup) {
    absl::StrAppend(&s, ", warmup_growth=", o.warmup_growth);
  }
  return s + ")";
}

// The batch operator at ops[i], the chain's last, into *o (returned).
absl::StatusOr<LaneOptions> ParseBatch(const proto::PipelineSpec& spec, int i, LaneOptions* o) {
  const auto& ops = spec.operators();
  if (i >= ops.size() || !ops[i].has_batch()) {
    return absl::InvalidArgumentError(
        absl::StrCat("operators[", i, "]: expected batch (", kChainGrammar, ")"));
  }
  if (ops[i].batch().microbatch_size() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("operators[", i, "] batch.microbatch_size must be >= 1, got 0"));
  }
  o->microbatch_size = ops[i].batch().microbatch_size();
  o->drop_last = ops[i].batch().drop_last();
  ++i;
  if (i < ops.size()) return AfterBatchError(spec, i);
  return *o;
}

}  // namespace

ShuffleOptions LaneOptions::sample_shuffle() const {
  ShuffleOptions o;
  o.buffer_size = shuffle_buffer_size;
  o.seed = shuffle_seed;
  o.algorithm = shuffle_algorithm;
  o.warmup_growth = shuffle_warmup_growth;
  return o;
}

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
  const bool keep_payload =
      i < ops.size() && ops[i].has_tokenize() && ops[i].tokenize().keep_payload();
  if (i < ops.size() && ops[i].has_tokenize()) ++i;
  for (int k = i; k < ops.size(); ++k) {
    if (ops[k].has_tokenize()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "operators[", k, "]: tokenize must be the first operator (", kChainGrammar, ")"));
    }
  }
  ReorderStages stages;
  RETURN_IF_ERROR(ParsePrePackStages(spec, &i, &stages));
  o.shuffle_buffer_size = stages.sample_shuffle.buffer_size;
  o.shuffle_seed = stages.sample_shuffle.seed;
  o.shuffle_algorithm = stages.sample_shuffle.algorithm;
  o.shuffle_warmup_growth = stages.sample_shuffle.warmup_growth;
  o.mixture = stages.mixture;
  o.mixture_before_shuffle = stages.mixture_before_shuffle;
  o.loss_mask = SpecHasLossMask(spec);
  if (i < ops.size() && ops[i].has_batch()) {
    // No packer: upstream's record batches, each record one whole sample.
    o.records = true;
    o.payload = keep_payload;
    o.emit_positions = false;
    return ParseBatch(spec, i, &o);
  }
  if (i >= ops.size() || !(ops[i].has_pack_flat() || ops[i].has_pack_sequences())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "operators[", i, "]: expected pack_flat, pack_sequences or batch (", kChainGrammar,
        ")"));
  }
  if (keep_payload) {
    return absl::InvalidArgumentError(absl::StrCat(
        "operators[0] tokenize.keep_payload (preserve_upstream_payload) keeps each record's "
        "source record, but operators[", i, "] packs records into rows that have no one "
        "source: drop "
        "keep_payload, or the packer (to get record batches)"));
  }
  o.segments = ops[i].has_pack_sequences();
  const auto& pack = o.segments ? ops[i].pack_sequences() : ops[i].pack_flat();
  const std::string op_name =
      absl::StrCat("operators[", i, "] ", o.segments ? "pack_sequences" : "pack_flat");
  if (pack.max_length() < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat(op_name, ".max_length must be >= 2, got ", pack.max_length()));
  }
  if (pack.max_length() > kMaxPackLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        op_name, ".max_length must be <= ", kMaxPackLength, " (a row's cells and positions ",
        "are int32), got ", pack.max_length()));
  }
  o.max_length = pack.max_length();
  ASSIGN_OR_RETURN(o.pack, PackOptionsFromSpec(pack, op_name));
  o.emit_positions = !pack.has_emit_positions() || pack.emit_positions();
  ++i;
  RETURN_IF_ERROR(ParseRowShuffle(spec, &i, &stages));
  o.row_shuffle = stages.row_shuffle;
  return ParseBatch(spec, i, &o);
}

std::string LaneOptions::Describe() const {
  std::string s;
  if (shuffle_buffer_size > 0) {
    s = absl::StrCat(DescribeShuffle(sample_shuffle()), " -> ");
  }
  if (mixture.enabled) {
    s = mixture_before_shuffle ? absl::StrCat(mixture.Describe(), " -> ", s)
                               : absl::StrCat(s, mixture.Describe(), " -> ");
  }
  if (records) {
    return absl::StrCat(s, "records", payload ? " with payloads" : "", " -> batch(",
                        microbatch_size, ", drop_last=", drop_last ? "true" : "false",
                        "); flush every ", flush_every_k_chunks, " lane chunks");
  }
  std::string algorithm = PackAlgorithmName(pack.algorithm);
  switch (pack.algorithm) {
    case PackAlgorithm::kWrap: break;
    case PackAlgorithm::kFirstFit:
    case PackAlgorithm::kBestFit:
      absl::StrAppend(&algorithm, ", num_bins=", pack.num_bins,
                      ", drop_oversized=", pack.drop_oversized ? "true" : "false");
      break;
    case PackAlgorithm::kBestFitWrap:
      absl::StrAppend(&algorithm, ", candidate_pool_size=", pack.candidate_pool_size,
                      ", max_candidate_age=", pack.max_candidate_age);
      break;
  }
  if (pack.pads()) absl::StrAppend(&algorithm, ", pad_token_id=", pack.pad_token_id);
  if (pack.min_sequence_length > 0) {
    absl::StrAppend(&algorithm, ", min_sequence_length=", pack.min_sequence_length);
  }
  if (pack.flush_fullest) absl::StrAppend(&algorithm, ", flush_strategy=fullest");
  if (pack.max_sequences_per_bin > 0) {
    absl::StrAppend(&algorithm, ", max_sequences_per_bin=", pack.max_sequences_per_bin);
  }
  if (row_shuffle.enabled()) {
    absl::StrAppend(&algorithm, ") -> ", DescribeShuffle(row_shuffle), " of rows");
  } else {
    absl::StrAppend(&algorithm, ")");
  }
  return absl::StrCat(s, segments ? "pack_sequences" : "pack_flat", "(max_length=", max_length,
                      ", ", algorithm, " -> batch(",
                      microbatch_size, ", drop_last=", drop_last ? "true" : "false",
                      "); flush every ", flush_every_k_chunks, " lane chunks");
}

bool SpecHasLossMask(const proto::PipelineSpec& spec) {
  for (const auto& d : spec.work_source().datasets()) {
    if (!d.loss_mask_field().empty()) return true;
  }
  for (const auto& op : spec.operators()) {
    if (op.has_tokenize() && op.tokenize().loss_on_size() > 0) return true;
  }
  return false;
}

PackFigures SumPackFigures(const std::vector<PackFigures>& lanes) {
  PackFigures total;
  for (const PackFigures& f : lanes) {
    total.records += f.records;
    total.tokens += f.tokens;
    total.padding_cells += f.padding_cells;
    total.dropped_tokens += f.dropped_tokens;
    total.dropped_samples += f.dropped_samples;
    total.split_samples += f.split_samples;
  }
  return total;
}

PackFigures PackStats::Snapshot(uint32_t lane) const {
  PackFigures f;
  f.lane = lane;
  f.records = records.load(std::memory_order_relaxed);
  f.tokens = tokens.load(std::memory_order_relaxed);
  f.padding_cells = padding_cells.load(std::memory_order_relaxed);
  f.dropped_tokens = dropped_tokens.load(std::memory_order_relaxed);
  f.dropped_samples = dropped_samples.load(std::memory_order_relaxed);
  f.split_samples = split_samples.load(std::memory_order_relaxed);
  return f;
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
  // The figures count what this stream returns and drops from `start` on.
  s->ResetStats();
  // Skipping ran out of the group (or the lane) early: not a position of this lane.
  if (!(s->position() == start)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "lane ", lane, " position {flush_group_chunk ", start.flush_group_chunk,
        ", records_into_group ", start.records_into_group,
        "} is beyond that flush group's records (a checkpoint of another spec?)"));
  }
  return s;
}

absl::StatusOr<std::optional<uint64_t>> LaneStream::GroupRecords(
    std::shared_ptr<const WorkSource> source, const LaneOptions& options, uint32_t lane,
    uint64_t group_chunk) {
  if (lane >= options.num_lanes || group_chunk % options.flush_every_k_chunks != 0) {
    return Create(std::move(source), options, lane, LanePosition{group_chunk, 0}).status();
  }
  // Without ensure_mixture (the one operator that drops samples), the reordering
  // operators only permute the group, which changes neither its sample count (records
  // mode: one record each) nor its token total (wrap: the records are that total cut
  // into max_length pieces, the tail dropped). Those count from the chunks directly.
  // (A schedule's chunks may differ from chunk_size by a few samples: records mode then
  // counts them.)
  if (!options.mixture.enabled &&
      (options.records || options.pack.algorithm == PackAlgorithm::kWrap)) {
    const std::optional<uint64_t> num_chunks = source->NumChunks();
    std::vector<SampleId> chunk;
    uint64_t samples = 0;
    uint64_t tokens = 0;
    for (uint64_t c = group_chunk; c < group_chunk + options.flush_every_k_chunks; ++c) {
      const uint64_t g =
          GlobalChunkOfLane(lane, c, options.num_lanes, options.routing, options.routing_seed);
      if (num_chunks && g >= *num_chunks) break;  // later lane chunks are later still
      if (options.records && source->phase_schedule() == nullptr) {
        samples += source->chunk_size();
        continue;
      }
      source->Chunk(g, &chunk);
      samples += chunk.size();
      if (options.records) continue;
      for (const SampleId& id : chunk) {
        tokens += source->datasets()[id.dataset]->SampleLength(id.shard, id.index);
      }
    }
    if (samples == 0) return std::optional<uint64_t>();
    return std::optional<uint64_t>(options.records ? samples : tokens / options.max_length);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<LaneStream> s,
                   Create(std::move(source), options, lane, LanePosition{group_chunk, 0}));
  if (!s->LoadGroup()) return std::optional<uint64_t>();
  if (options.records) return std::optional<uint64_t>(s->group_samples_.size());
  uint64_t records = 0;
  if (!s->group_flushed_) {  // else the row shuffle packed the group whole already
    while (s->sample_cursor_ < s->group_samples_.size()) {
      s->FeedSample(s->group_samples_[s->sample_cursor_++]);
      records += s->ready_.size();
      s->ready_.clear();
    }
    s->packer_->Flush(&s->ready_);
  }
  return std::optional<uint64_t>(records + s->ready_.size());
}

bool LaneStream::LoadGroup() {
  group_samples_.clear();
  group_chunks_.clear();
  std::vector<SampleId> chunk;
  const std::optional<uint64_t> num_chunks = source_->NumChunks();
  for (uint64_t c = group_chunk_; c < group_chunk_ + options_.flush_every_k_chunks; ++c) {
    const uint64_t g = GlobalChunkOfLane(lane_, c, options_.num_lanes, options_.routing,
                                         options_.routing_seed);
    if (num_chunks && g >= *num_chunks) break;  // Later lane chunks are later still.
    source_->Chunk(g, &chunk);
    group_samples_.insert(group_samples_.end(), chunk.begin(), chunk.end());
    if (options_.records) {
      for (const SampleId& id : chunk) group_chunks_[id].push_back(g);
    }
  }
  if (group_samples_.empty()) return false;
  ReorderGroupSamples();
  sample_cursor_ = 0;
  group_flushed_ = false;
  if (!options_.records) packer_ = Packer::Create(options_.pack);
  synced_ = PackCounts{};
  ready_.clear();
  records_in_group_ = 0;
  group_loaded_ = true;
  if (options_.row_shuffle.enabled()) PackAndShuffleRows();
  return true;
}

void LaneStream::SyncDropCounts() {
  if (packer_ == nullptr) return;  // Records mode drops nothing.
  const PackCounts& now = packer_->counts();
  stats_->dropped_tokens.fetch_add(now.dropped_tokens - synced_.dropped_tokens,
                                   std::memory_order_relaxed);
  stats_->dropped_samples.fetch_add(now.dropped_samples - synced_.dropped_samples,
                                    std::memory_order_relaxed);
  stats_->split_samples.fetch_add(now.split_samples - synced_.split_samples,
                                  std::memory_order_relaxed);
  synced_ = now;
}

bool LaneStream::NextRecord(Record* record) {
  while (!ended_) {
    if (!ready_.empty()) {
      record->segments = std::move(ready_.front().segments);
      ready_.pop_front();
      record->sample_ids.clear();
      for (const Segment& seg : record->segments) {
        if (seg.padding) continue;
        if (record->sample_ids.empty() || record->sample_ids.back() != seg.id) {
          record->sample_ids.push_back(seg.id);
        }
      }
      ++records_in_group_;
      return true;
    }
    if (!group_loaded_) {
      if (!LoadGroup()) ended_ = true;
      continue;
    }
    if (options_.records && sample_cursor_ < group_samples_.size()) {
      const SampleId id = group_samples_[sample_cursor_++];
      FeedSample(id);  // Counted in the mixture figures; no packer.
      const Dataset& d = *source_->datasets()[id.dataset];
      record->segments.assign(1, Segment{id, 0, d.SampleLength(id.shard, id.index), false});
      record->sample_ids.assign(1, id);
      std::deque<uint64_t>& chunks = group_chunks_[id];
      record->chunk = chunks.empty() ? 0 : chunks.front();
      if (!chunks.empty()) chunks.pop_front();
      ++records_in_group_;
      return true;
    }
    if (sample_cursor_ < group_samples_.size()) {
      const SampleId id = group_samples_[sample_cursor_++];
      FeedSample(id);
    } else if (!group_flushed_) {
      if (packer_ == nullptr) {  // Records mode: nothing to flush.
        group_flushed_ = true;
        continue;
      }
      packer_->Flush(&ready_);  // Every open bin is emitted at the group's end.
      group_flushed_ = true;
    } else {
      // The group is spent: move to the next.
      group_loaded_ = false;
      group_chunk_ += options_.flush_every_k_chunks;
      records_in_group_ = 0;  // Keeps position() exact if the lane ends here.
    }
    SyncDropCounts();
  }
  return false;
}

absl::StatusOr<std::optional<BatchPlan>> LaneStream::NextPlan() {
  BatchPlan plan;
  plan.lane = lane_;
  plan.cols = static_cast<uint32_t>(options_.max_length);
  plan.pad_token_id = options_.pack.pad_token_id;
  plan.loss_mask = options_.loss_mask;
  plan.segment_lengths = options_.segments;
  plan.records = options_.records;
  plan.payload = options_.payload;
  plan.start = position();
  std::unordered_set<SampleId, SampleIdHash> seen;
  Record record;
  uint64_t record_tokens = 0;
  while (plan.rows < options_.microbatch_size) {
    if (plan.rows == 0) plan.start = position();
    if (!NextRecord(&record)) break;
    plan.segments.insert(plan.segments.end(), record.segments.begin(), record.segments.end());
    if (options_.records) {
      // One id per row, repeats kept: row r is sample_ids[r].
      plan.sample_ids.push_back(record.sample_ids.front());
      plan.chunk_ids.push_back(record.chunk);
      record_tokens += record.segments.front().count;
    } else {
      for (const SampleId& id : record.sample_ids) {
        if (seen.insert(id).second) plan.sample_ids.push_back(id);
      }
    }
    ++plan.rows;
  }
  if (plan.rows == 0 || (plan.rows < options_.microbatch_size && options_.drop_last)) {
    return std::optional<BatchPlan>();
  }
  plan.end = position();
  plan.lane_batch_index = next_batch_index_++;
  if (options_.records) {
    stats_->records.fetch_add(plan.rows, std::memory_order_relaxed);
    stats_->tokens.fetch_add(record_tokens, std::memory_order_relaxed);
    return std::optional<BatchPlan>(std::move(plan));
  }
  uint64_t padding = 0;
  for (const Segment& seg : plan.segments) {
    if (seg.padding) padding += seg.count;
  }
  stats_->records.fetch_add(plan.rows, std::memory_order_relaxed);
  stats_->tokens.fetch_add(uint64_t{plan.rows} * plan.cols - padding, std::memory_order_relaxed);
  stats_->padding_cells.fetch_add(padding, std::memory_order_relaxed);
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
                             int32_t* tokens, int32_t* positions, int32_t* valid_tokens,
                             uint8_t* loss_mask) {
  const uint64_t cells = static_cast<uint64_t>(plan.rows) * plan.cols;
  if (valid_tokens != nullptr) std::fill(valid_tokens, valid_tokens + plan.rows, 0);
  uint64_t filled = 0;
  for (const Segment& seg : plan.segments) {
    if (seg.padding) {
      if (filled + seg.count > cells) {
        return absl::InternalError(absl::StrCat("batch plan of lane ", plan.lane, " batch ",
                                                plan.lane_batch_index, " pads beyond its ",
                                                cells, " cells"));
      }
      std::fill(tokens + filled, tokens + filled + seg.count, plan.pad_token_id);
      if (loss_mask != nullptr) std::fill(loss_mask + filled, loss_mask + filled + seg.count, 0);
      if (positions != nullptr) {
        int32_t* p = positions + filled;
        for (uint64_t i = 0; i < seg.count; ++i) p[i] = static_cast<int32_t>(i);
      }
      filled += seg.count;
      continue;
    }
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
      return SampleReadError(plan, id, datasets, read);
    }
    if (loss_mask != nullptr) {
      const absl::Status mask = datasets[id.dataset]->CopyLossMask(
          id.shard, id.index, seg.offset, seg.count, loss_mask + filled);
      if (!mask.ok()) {
        return SampleReadError(plan, id, datasets, mask);
      }
    }
    if (positions != nullptr) {
      int32_t* p = positions + filled;
      for (uint64_t i = 0; i < seg.count; ++i) p[i] = static_cast<int32_t>(i);
    }
    // Segments never cross rows (BatchPlan's invariant), so the first cell names the row.
    if (valid_tokens != nullptr && seg.count > 0) {
      valid_tokens[filled / plan.cols] += static_cast<int32_t>(seg.count);
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
  if (plan.records) return MaterializeRecords(plan, datasets);
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
  batch.valid_tokens.resize(plan.rows);
  if (plan.loss_mask) batch.loss_mask.resize(cells);
  if (plan.segment_lengths) batch.segments = SegmentTableOf(plan);
  RETURN_IF_ERROR(MaterializeInto(plan, datasets, batch.tokens.data(), batch.positions.data(),
                                  batch.valid_tokens.data(),
                                  plan.loss_mask ? batch.loss_mask.data() : nullptr));
  return batch;
}

}  // namespace zephon::pipeline
