#include "daemon/pipeline_instance.h"

#include <algorithm>
#include <cstring>

#include <spdlog/spdlog.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/digest.h"
#include "common/status_macros.h"
#include "common/logging.h"
#include "daemon/metrics/counters.h"
#include "daemon/instance_figures.h"
#include "daemon/pipeline/batching/segment_table.h"
#include "daemon/pipeline/spec_string_form.h"
#include "daemon/pipeline/tokenize_spec.h"

namespace zephon::daemon {
namespace {

std::shared_ptr<spdlog::logger> Log() { return SubsystemLogger("instance"); }
std::shared_ptr<spdlog::logger> RingLog() { return SubsystemLogger("ring"); }

// Window of the released-rate samples in Status.
constexpr absl::Duration kRateWindow = absl::Seconds(10);

// How long one Loan waits before re-checking for shutdown.
constexpr absl::Duration kLoanPoll = absl::Milliseconds(100);

// The audit log's digest of a batch's int32 token cells (little-endian, as in memory
// on every platform zephond builds for).
std::string TokenSha256(const int32_t* tokens, uint64_t count) {
  return Sha256(absl::string_view(reinterpret_cast<const char*>(tokens), count * sizeof(int32_t)));
}

// Copies an already materialized batch (parallel path) into `slot`; adds its loss mask
// to `masks` when it has one.
absl::Status WriteBatch(const pipeline::Batch& batch, const BatchSchema& schema,
                        shm::SlotWriter* slot, pipeline::LossMaskTally* masks,
                        std::string* token_sha256) {
  if (token_sha256 != nullptr) {
    *token_sha256 = TokenSha256(batch.tokens.data(), batch.tokens.size());
  }
  if (batch.records) {
    const pipeline::RecordSizes sizes{batch.tokens.size(), batch.payload.size()};
    ASSIGN_OR_RETURN(pipeline::RecordCells dst,
                     AddRecordTensors(schema, batch.rows, sizes, batch.sample_ids,
                                      batch.chunk_ids, slot));
    std::memcpy(dst.tokens, batch.tokens.data(), batch.tokens.size() * sizeof(int32_t));
    std::memcpy(dst.record_offsets, batch.record_offsets.data(),
                batch.record_offsets.size() * sizeof(int64_t));
    if (dst.loss_mask != nullptr) {
      std::memcpy(dst.loss_mask, batch.loss_mask.data(), batch.loss_mask.size());
      masks->Add(batch.lane, batch.loss_mask.data(), batch.loss_mask.size(), 0);
    }
    if (dst.payload != nullptr) {
      std::memcpy(dst.payload, batch.payload.data(), batch.payload.size());
      std::memcpy(dst.payload_offsets, batch.payload_offsets.data(),
                  batch.payload_offsets.size() * sizeof(int64_t));
    }
    slot->set_lane(batch.lane);
    slot->set_lane_batch_index(batch.lane_batch_index);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(BatchCells dst, AddBatchTensors(schema, batch.rows, batch.sample_ids,
                                                   &batch.segments, slot));
  std::memcpy(dst.tokens, batch.tokens.data(), batch.tokens.size() * sizeof(int32_t));
  if (dst.positions != nullptr) {
    std::memcpy(dst.positions, batch.positions.data(), batch.positions.size() * sizeof(int32_t));
  }
  if (dst.valid_tokens != nullptr) {
    std::memcpy(dst.valid_tokens, batch.valid_tokens.data(),
                batch.valid_tokens.size() * sizeof(int32_t));
  }
  if (dst.loss_mask != nullptr) {
    std::memcpy(dst.loss_mask, batch.loss_mask.data(), batch.loss_mask.size());
    masks->Add(batch.lane, batch.loss_mask.data(), batch.loss_mask.size(),
               pipeline::PaddingCells(batch));
  }
  slot->set_lane(batch.lane);
  slot->set_lane_batch_index(batch.lane_batch_index);
  return absl::OkStatus();
}

// Materializes a plan straight into `slot` (inline path: no intermediate copy); adds its
// loss mask to `masks` when it has one.
absl::Status WritePlan(const pipeline::BatchPlan& plan, const BatchSchema& schema,
                       const std::vector<std::shared_ptr<const pipeline::Dataset>>& datasets,
                       shm::SlotWriter* slot, pipeline::LossMaskTally* masks,
                       std::string* token_sha256) {
  if (plan.records) {
    const pipeline::RecordSizes sizes = pipeline::RecordSizesOf(plan, datasets);
    const std::vector<int64_t> chunk_ids(plan.chunk_ids.begin(), plan.chunk_ids.end());
    ASSIGN_OR_RETURN(pipeline::RecordCells dst,
                     AddRecordTensors(schema, plan.rows, sizes, plan.sample_ids, chunk_ids,
                                      slot));
    RETURN_IF_ERROR(pipeline::MaterializeRecordsInto(plan, datasets, dst));
    if (token_sha256 != nullptr) *token_sha256 = TokenSha256(dst.tokens, sizes.tokens);
    if (dst.loss_mask != nullptr) masks->Add(plan.lane, dst.loss_mask, sizes.tokens, 0);
    slot->set_lane(plan.lane);
    slot->set_lane_batch_index(plan.lane_batch_index);
    return absl::OkStatus();
  }
  pipeline::SegmentTable segments;
  if (schema.max_segments > 0) segments = pipeline::SegmentTableOf(plan);
  ASSIGN_OR_RETURN(BatchCells dst,
                   AddBatchTensors(schema, plan.rows, plan.sample_ids, &segments, slot));
  RETURN_IF_ERROR(
      pipeline::MaterializeInto(plan, datasets, dst.tokens, dst.positions, dst.valid_tokens,
                                dst.loss_mask));
  if (token_sha256 != nullptr) {
    *token_sha256 = TokenSha256(dst.tokens, uint64_t{plan.rows} * plan.cols);
  }
  if (dst.loss_mask != nullptr) {
    masks->Add(plan.lane, dst.loss_mask, uint64_t{plan.rows} * plan.cols,
               pipeline::PaddingCells(plan));
  }
  slot->set_lane(plan.lane);
  slot->set_lane_batch_index(plan.lane_batch_index);
  return absl::OkStatus();
}


// Explain's line for a dataset converted into the token cache: "    <kind> dataset
// '<name>': <counts> (<how it was opened>)". null_records only when there were any,
// so a JSONL text dataset's line reads as before.
void AppendConversionLine(const std::string& kind, const pipeline::Dataset& d,
                          std::string* stages) {
  const pipeline::TextShardStats t = d.TextStats();
  absl::StrAppend(stages, "    ", kind, " dataset '", d.name(), "': records=", t.records,
                  " samples=", t.samples, " tokens=", t.tokens,
                  " invalid_utf8_records=", t.invalid_utf8_records,
                  " skipped_missing=", t.skipped_missing, " truncated=", t.truncated_records,
                  " split=", t.split_records);
  if (t.null_records > 0) absl::StrAppend(stages, " null_records=", t.null_records);
  if (t.tokenized) {
    absl::StrAppend(stages, absl::StrFormat(" (tokenized at open: %.1f MB read in %.2f s, "
                                            "%.1f MB/s)",
                                            t.tokenized_bytes / 1e6, t.tokenize_seconds,
                                            t.tokenized_bytes / 1e6 /
                                                std::max(t.tokenize_seconds, 1e-9)));
  } else {
    absl::StrAppend(stages, " (from the token cache)");
  }
  absl::StrAppend(stages, "\n");
}

}  // namespace

absl::StatusOr<std::unique_ptr<PipelineInstance>> PipelineInstance::Create(
    InstanceConfig config, std::unique_ptr<pipeline::GroupStream> stream,
    std::shared_ptr<exec::WorkerPool> pool, std::shared_ptr<metrics::DaemonCounters> counters) {
  if (counters == nullptr) counters = std::make_shared<metrics::DaemonCounters>();
  ASSIGN_OR_RETURN(std::unique_ptr<exec::ParallelBatches> batches,
                   exec::ParallelBatches::Create(std::move(stream), std::move(pool),
                                                 config.materialize));
  ASSIGN_OR_RETURN(auto writer,
                   shm::RingWriter::Create(config.shm_name, config.geometry,
                                           config.instance_id, config.env));
  std::unique_ptr<audit::AuditLog> audit;
  if (!config.audit_dir.empty()) {
    absl::StatusOr<std::unique_ptr<audit::AuditLog>> opened =
        audit::AuditLog::Open(config.audit_dir, config.instance_id);
    if (!opened.ok()) {
      return absl::Status(opened.status().code(),
                          absl::StrCat("the audit log: ", opened.status().message()));
    }
    audit = *std::move(opened);
  }
  std::unique_ptr<PipelineInstance> instance(
      new PipelineInstance(std::move(config), std::move(batches), std::move(writer),
                           std::move(counters)));
  instance->audit_ = std::move(audit);
  for (const std::string& dir : instance->config_.anchor_dirs) {
    const InstanceConfig& c = instance->config_;
    instance->anchors_.push_back(std::make_unique<audit::StepAnchorWriter>(
        dir,
        audit::AnchorOrigin{c.run_key, c.instance_id, c.spec_hash,
                            static_cast<uint32_t>(c.spec.canonical_replicas())},
        c.flush_every_k_chunks, c.microbatch_size));
  }
  if (instance->audit_ != nullptr) {
    Log()->info("instance {}: auditing every batch into {}", instance->config_.instance_id,
                instance->audit_->path());
  }
  {
    absl::MutexLock lock(&instance->mu_);
    for (uint32_t i = 0; i < instance->config_.reserved_readers; ++i) {
      ASSIGN_OR_RETURN(uint32_t index, instance->writer_->ReserveReader(0));
      instance->reserved_.push_back(index);
    }
    std::reverse(instance->reserved_.begin(), instance->reserved_.end());
  }
  instance->producer_ = std::thread([p = instance.get()] { p->ProduceLoop(); });
  Log()->info("instance {}: created ring {} ({} slots x {} bytes, {} lanes {}), "
               "materialize parallelism {} (queue {}), holding {} reader slot(s) for local peers",
               instance->config_.instance_id, instance->config_.shm_name,
               instance->config_.geometry.slot_count,
               instance->config_.geometry.slot_payload_bytes,
               instance->config_.owned_lanes.size(),
               absl::StrJoin(instance->config_.owned_lanes, ","),
               instance->batches_->parallelism(), instance->batches_->queue_capacity(),
               instance->config_.reserved_readers);
  return instance;
}

PipelineInstance::PipelineInstance(InstanceConfig config,
                                   std::unique_ptr<exec::ParallelBatches> batches,
                                   std::unique_ptr<shm::RingWriter> writer,
                                   std::shared_ptr<metrics::DaemonCounters> counters)
    : config_(std::move(config)),
      created_(config_.env->Now()),
      counters_(std::move(counters)),
      writer_(std::move(writer)),
      // Seeded with where the stream starts: zeros, or the restored checkpoint's lanes.
      progress_(std::make_unique<ProgressLog>(batches->stream().Progress())),
      batches_(std::move(batches)) {}

PipelineInstance::~PipelineInstance() {
  stop_.store(true);
  batches_->Cancel();
  writer_->Close();
  if (producer_.joinable()) producer_.join();
  Log()->info("instance {}: closed ring {} after {} batches", config_.instance_id,
               config_.shm_name, produced_.load());
}

void PipelineInstance::ProduceLoop() {
  const bool inline_path = batches_->is_inline();
  while (!stop_.load()) {
    // The next batch in order: a plan to materialize straight into the slot (inline),
    // or a batch the worker pool already materialized.
    std::optional<pipeline::BatchPlan> plan;
    std::optional<pipeline::Batch> batch;
    absl::Status failed;
    bool end = false;
    if (inline_path) {
      absl::StatusOr<std::optional<pipeline::BatchPlan>> next = batches_->NextPlan();
      if (!next.ok()) {
        failed = next.status();
      } else if (!next->has_value()) {
        end = true;
      } else {
        plan = std::move(**next);
      }
    } else {
      // Waits at most one poll for the next batch in order, then re-checks stop_. Real
      // time, not the Env's: this deadline only bounds a CondVar wait so stop_ is seen.
      absl::StatusOr<std::optional<pipeline::Batch>> next =
          batches_->Next(absl::Now() + kLoanPoll);
      if (absl::IsDeadlineExceeded(next.status())) continue;
      if (!next.ok()) {
        failed = next.status();
      } else if (!next->has_value()) {
        end = true;
      } else {
        batch = std::move(**next);
      }
    }
    if (stop_.load()) return;
    if (!failed.ok()) {
      Log()->error("{}: pipeline failed: {}", Where(), failed.ToString());
      counters_->CountError(metrics::ErrorKind::kPipeline);
      writer_->Poison(-1, absl::StrCat("pipeline error in zephond: ", failed.message()));
      return;
    }
    if (end) {
      absl::Status published = absl::DeadlineExceededError("");
      while (!stop_.load() && absl::IsDeadlineExceeded(published)) {
        published = writer_->PublishEndOfStream(kLoanPoll);
      }
      if (published.ok()) {
        Log()->info("instance {}: end of data after {} batches", config_.instance_id,
                     produced_.load());
      }
      return;
    }
    absl::StatusOr<shm::SlotWriter> slot = absl::DeadlineExceededError("");
    while (!stop_.load()) {
      slot = writer_->Loan(kLoanPoll);
      if (slot.ok() || !absl::IsDeadlineExceeded(slot.status())) break;
    }
    if (stop_.load()) return;
    if (!slot.ok()) {
      if (!absl::IsCancelled(slot.status())) {
        RingLog()->error("{}: loan failed: {}", Where(), slot.status().ToString());
        counters_->CountError(metrics::ErrorKind::kRing);
      }
      return;
    }
    std::string token_sha256;
    std::string* digest = audit_ != nullptr ? &token_sha256 : nullptr;
    absl::Status written =
        plan ? WritePlan(*plan, config_.schema, batches_->datasets(), &*slot, &loss_masks_,
                         digest)
             : WriteBatch(*batch, config_.schema, &*slot, &loss_masks_, digest);
    if (!written.ok()) {
      RingLog()->error("{}: batch write failed: {}", Where(), written.ToString());
      counters_->CountError(metrics::ErrorKind::kRing);
      writer_->Poison(-1, absl::StrCat("zephond could not write a batch: ", written.message()));
      return;
    }
    // Recorded before publishing: once a reader can take the batch, a checkpoint may ask
    // where its lane stands after it.
    const uint64_t seq = produced_.load();
    absl::Status recorded =
        plan ? progress_->Record(seq, plan->lane, plan->lane_batch_index, plan->end)
             : progress_->Record(seq, batch->lane, batch->lane_batch_index, batch->end);
    if (!recorded.ok()) {  // an engine invariant broke: checkpoints would be wrong
      Log()->error("{}: {}", Where(), recorded.ToString());
      counters_->CountError(metrics::ErrorKind::kPipeline);
      writer_->Poison(-1, absl::StrCat("zephond lost track of lane progress: ",
                                       recorded.message()));
      return;
    }
    // Audited before publishing too: every batch a reader can take has its record (a
    // batch audited and then not published, at shutdown, is published again the same).
    if (audit_ != nullptr) {
      Audit(seq, plan ? plan->lane : batch->lane,
            plan ? plan->lane_batch_index : batch->lane_batch_index,
            plan ? plan->start : batch->start, plan ? plan->rows : batch->rows,
            plan ? plan->sample_ids : batch->sample_ids, std::move(token_sha256));
    }
    if (absl::Status published = writer_->Publish(std::move(*slot)); !published.ok()) {
      if (!absl::IsCancelled(published)) {
        RingLog()->error("{}: publish failed: {}", Where(), published.ToString());
        counters_->CountError(metrics::ErrorKind::kRing);
      }
      return;
    }
    produced_.fetch_add(1);
    // After publishing: anchors save `zephonctl which` time and are no contract, so the
    // first one (which reads what earlier runs anchored) never delays a batch.
    for (auto it = anchors_.begin(); it != anchors_.end();) {
      const pipeline::LanePosition& start = plan ? plan->start : batch->start;
      absl::Status noted = (*it)->Note(
          plan ? plan->lane : batch->lane,
          plan ? plan->lane_batch_index : batch->lane_batch_index, start.flush_group_chunk,
          start.records_into_group);
      if (noted.ok()) {
        ++it;
        continue;
      }
      Log()->warn("{}: no more step anchors in {} (`zephonctl which` counts from the "
                  "start instead): {}", Where(), (*it)->dir(), noted.ToString());
      it = anchors_.erase(it);
    }
  }
}

void PipelineInstance::Audit(uint64_t seq, uint32_t lane, uint64_t lane_batch_index,
                             const pipeline::LanePosition& start, uint32_t rows,
                             const std::vector<pipeline::SampleId>& samples,
                             std::string token_sha256) {
  proto::AuditRecord record;
  record.set_run_id(config_.run_key);
  record.set_instance_id(config_.instance_id);
  record.set_spec_hash(config_.spec_hash);
  record.set_canonical_replicas(config_.spec.canonical_replicas());
  record.set_dp_degree(config_.identity.dp_degree);
  record.set_dp_group_id(config_.identity.dp_group_id);
  record.set_seq(seq);
  record.set_lane(lane);
  record.set_lane_batch_index(lane_batch_index);
  record.set_rows(rows);
  record.set_flush_group_chunk(start.flush_group_chunk);
  record.set_records_into_group(start.records_into_group);
  record.set_token_sha256(std::move(token_sha256));
  for (const pipeline::SampleId& id : samples) {
    record.add_sample_ids(id.dataset);
    record.add_sample_ids(id.shard);
    record.add_sample_ids(id.index);
  }
  record.set_unix_ms(absl::ToUnixMillis(config_.env->Now()));
  if (absl::Status appended = audit_->Append(record); !appended.ok()) {
    // The run goes on; its audit has a gap from here, which `zephonctl audit diff`
    // shows as steps missing from this run.
    Log()->error("{}: audit log {} stopped after {} batches: {}", Where(), audit_->path(), seq,
                 appended.ToString());
    counters_->CountError(metrics::ErrorKind::kPipeline);
    audit_.reset();
  }
}

absl::Status PipelineInstance::AttachReader(uint32_t global_rank, int64_t pid,
                                            proto::AttachReply* reply) {
  absl::MutexLock lock(&mu_);
  std::optional<uint32_t> reserved;
  if (!reserved_.empty()) reserved = reserved_.back();
  ASSIGN_OR_RETURN(shm::ReaderLease lease,
                   writer_->AttachReader(static_cast<int32_t>(global_rank), pid, 0, reserved));
  if (reserved) reserved_.pop_back();
  attached_.push_back(lease.index);
  ranks_.push_back(global_rank);
  pids_.push_back(pid);
  reply->set_instance_id(config_.instance_id);
  reply->set_spec_hash(config_.spec_hash);
  reply->set_ring_name(config_.shm_name);
  reply->set_ring_generation(writer_->generation());
  reply->set_ring_bytes(writer_->total_bytes());
  reply->set_reader_index(lease.index);
  reply->set_lease_epoch(lease.lease_epoch);
  for (uint32_t lane : config_.owned_lanes) reply->add_owned_lanes(lane);
  reply->set_canonical_replicas(config_.identity.canonical_replicas);
  reply->set_dp_degree(config_.identity.dp_degree);
  reply->set_dp_group_id(config_.identity.dp_group_id);
  Log()->info("instance {}: rank {} (pid {}) attached as reader {} of ring {}",
               config_.instance_id, global_rank, pid, lease.index, config_.shm_name);
  return absl::OkStatus();
}

void PipelineInstance::DetachReader(uint32_t reader_index, bool died) {
  absl::MutexLock lock(&mu_);
  auto it = std::find(attached_.begin(), attached_.end(), reader_index);
  if (it == attached_.end()) return;
  const uint32_t rank = ranks_[it - attached_.begin()];
  ranks_.erase(ranks_.begin() + (it - attached_.begin()));
  pids_.erase(pids_.begin() + (it - attached_.begin()));
  attached_.erase(it);
  if (died) {
    Log()->warn("{} rank={}: reader {} lost its connection without detaching; poisoning "
                "the ring", Where(), rank, reader_index);
    counters_->CountError(metrics::ErrorKind::kReaderDied);
    writer_->MarkReaderDead(reader_index, static_cast<int32_t>(rank),
                            absl::StrCat("rank ", rank, " of instance ", config_.instance_id,
                                         " died (its connection to zephond closed without "
                                         "a detach); its DP-group peers cannot continue"));
  } else {
    writer_->DetachReader(reader_index);
    Log()->info("instance {}: rank {} (reader {}) detached", config_.instance_id, rank,
                 reader_index);
  }
}

void PipelineInstance::Close() {
  stop_.store(true);
  batches_->Cancel();
  writer_->Close();
}

bool PipelineInstance::poisoned() const {
  return writer_->state() == shm::RingState::kPoisoned;
}

std::optional<int64_t> PipelineInstance::PidOfRank(uint32_t global_rank) const {
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < ranks_.size(); ++i) {
    if (ranks_[i] == global_rank) return pids_[i];
  }
  return std::nullopt;
}

std::vector<uint32_t> PipelineInstance::attached_ranks() const {
  absl::MutexLock lock(&mu_);
  return ranks_;
}

int PipelineInstance::attached_readers() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(attached_.size());
}

absl::StatusOr<std::vector<proto::LaneProgress>> PipelineInstance::ProgressAfter(
    uint64_t n_taken) const {
  return progress_->ProgressAfter(n_taken);
}

void PipelineInstance::Tick(absl::Time now) {
  writer_->Heartbeat();
  // Every reader released the batches below this cursor, and a checkpoint only asks
  // about counts at or above a reader's releases: older log entries can be folded.
  // Clamped: readers may have released up to what was published, and the log records
  // a batch just before publishing it.
  const uint64_t released = std::min(writer_->MinGatingConsumed(), progress_->recorded());
  if (absl::Status folded = progress_->FoldBelow(released); !folded.ok()) {
    Log()->warn("{}: {}", Where(), folded.ToString());
  }
  const uint64_t all_released = Released();
  absl::MutexLock lock(&mu_);
  released_samples_.emplace_back(now, all_released);
  while (released_samples_.size() > 2 && now - released_samples_[1].first >= kRateWindow) {
    released_samples_.pop_front();
  }
  if (!reserved_.empty() && now - created_ > config_.join_timeout) {
    Log()->warn("{}: {} expected local peer(s) did not attach within {}; no longer "
                "holding the start of the stream for them (a later peer gets its own "
                "instance from the start)",
                Where(), reserved_.size(), absl::FormatDuration(config_.join_timeout));
    for (uint32_t index : reserved_) writer_->ReleaseReservation(index);
    reserved_.clear();
  }
}

uint64_t PipelineInstance::ring_bytes() const { return writer_->total_bytes(); }

uint64_t PipelineInstance::ring_generation() const { return writer_->generation(); }

std::string PipelineInstance::Where() const {
  return absl::StrCat("run=", config_.run_key, " instance=", config_.instance_id,
                      " ring=", config_.shm_name, " gen=", writer_->generation());
}

uint64_t PipelineInstance::Released() const {
  const uint64_t published = writer_->published();
  uint64_t released = published;
  bool any = false;
  for (const shm::ReaderInfo& r : writer_->Readers()) {
    if (r.state != shm::ReaderState::kAttached) continue;
    released = any ? std::min(released, r.consumed) : r.consumed;
    any = true;
  }
  return std::min(released, published);
}

proto::InstanceStatus PipelineInstance::Status() const {
  proto::InstanceStatus s;
  s.set_instance_id(config_.instance_id);
  s.set_run_id(config_.identity.run_id);
  s.set_dp_degree(config_.identity.dp_degree);
  s.set_dp_group_id(config_.identity.dp_group_id);
  s.set_spec_hash(config_.spec_hash);
  s.set_ring_name(config_.shm_name);
  s.set_ring_bytes(writer_->total_bytes());
  s.set_ring_slots(config_.geometry.slot_count);
  s.set_produced(produced_.load());
  s.set_canonical_replicas(config_.identity.canonical_replicas);
  if (const proto::TokenizeSpec* tokenize = pipeline::FindTokenize(config_.spec)) {
    s.set_tokenize(pipeline::DescribeTokenize(*tokenize));
  }
  for (const auto& dataset : config_.datasets) {
    if (!dataset->has_conversion_stats()) continue;
    const pipeline::TextShardStats t = dataset->TextStats();
    proto::TextDatasetStatus* out = s.add_text_datasets();
    out->set_dataset(dataset->name());
    out->set_records(t.records);
    out->set_samples(t.samples);
    out->set_tokens(t.tokens);
    out->set_invalid_utf8_records(t.invalid_utf8_records);
    out->set_skipped_missing(t.skipped_missing);
    out->set_truncated_records(t.truncated_records);
    out->set_split_records(t.split_records);
    out->set_null_records(t.null_records);
    uint32_t tokenized_files = 0;
    for (uint32_t i = 0; i < dataset->NumShards(); ++i) {
      if (dataset->ShardTextStats(i)->tokenized) ++tokenized_files;
    }
    out->set_tokenized_files(tokenized_files);
    out->set_tokenized_bytes(t.tokenized_bytes);
    out->set_tokenize_seconds(t.tokenize_seconds);
  }
  for (uint32_t lane : config_.owned_lanes) s.add_owned_lanes(lane);
  AddMixtureStatus(batches_->Mixture(), DatasetNames(config_.spec), &s);
  const bool curriculum = batches_->stream().source()->CurriculumAt(0).has_value();
  if (const std::optional<uint64_t> g = curriculum ? FurthestChunk() : std::nullopt;
      g.has_value()) {
    if (const auto at = batches_->stream().source()->CurriculumAt(*g); at.has_value()) {
      AddCurriculumStatus(*at, DatasetNames(config_.spec), s.mutable_curriculum());
    }
  }
  for (const pipeline::PackFigures& f : batches_->Packing()) {
    proto::LanePackingStatus* p = s.add_packing();
    p->set_lane(f.lane);
    p->set_records(f.records);
    p->set_tokens(f.tokens);
    p->set_padding_cells(f.padding_cells);
    p->set_dropped_tokens(f.dropped_tokens);
    p->set_dropped_samples(f.dropped_samples);
    p->set_split_samples(f.split_samples);
  }
  for (const pipeline::LossMaskFigures& f : loss_masks_.Snapshot()) {
    proto::LaneLossMaskStatus* m = s.add_loss_mask();
    m->set_lane(f.lane);
    m->set_tokens(f.tokens);
    m->set_masked_tokens(f.masked);
  }
  const uint64_t produced = produced_.load();
  const uint64_t published = writer_->published();
  const uint64_t released = Released();
  s.set_released(released);
  s.set_ring_occupancy(published - released);
  s.set_ring_generation(writer_->generation());
  s.set_readers_attached(static_cast<uint32_t>(attached_readers()));
  const exec::OrderedStageStats stage = batches_->stats();
  s.set_materialize_in_flight(stage.in_flight);
  s.set_materialize_buffered(stage.buffered);
  {
    absl::MutexLock lock(&mu_);
    if (released_samples_.size() >= 2) {
      const auto& [t0, r0] = released_samples_.front();
      const auto& [t1, r1] = released_samples_.back();
      const double seconds = absl::ToDoubleSeconds(t1 - t0);
      if (seconds > 0 && r1 >= r0) s.set_released_per_s(static_cast<double>(r1 - r0) / seconds);
    }
  }
  for (const shm::ReaderInfo& r : writer_->Readers()) {
    proto::ReaderStatus* rs = s.add_readers();
    rs->set_lag(produced > r.consumed ? produced - r.consumed : 0);
    rs->set_reader_index(r.index);
    rs->set_global_rank(r.rank < 0 ? 0 : r.rank);
    rs->set_released(r.consumed);
    rs->set_state(std::string(shm::ReaderStateName(r.state)));
    rs->set_pid(r.pid);
    rs->set_waiting(r.waiting);
  }
  return s;
}

std::optional<uint64_t> PipelineInstance::FurthestChunk() const {
  // Where the furthest of this instance's lanes stands (at what its readers released):
  // its flush group's first lane chunk c is in global chunks [c C, (c + 1) C).
  const uint64_t released = std::min(writer_->MinGatingConsumed(), progress_->recorded());
  absl::StatusOr<std::vector<proto::LaneProgress>> lanes = progress_->ProgressAfter(released);
  if (!lanes.ok()) return std::nullopt;
  uint64_t furthest = 0;
  for (const auto& lane : *lanes) furthest = std::max(furthest, lane.flush_group_chunk());
  return furthest * config_.identity.canonical_replicas;
}

void PipelineInstance::AppendMixtureLines(std::string* stages) const {
  const std::optional<uint64_t> g = FurthestChunk();
  if (!g.has_value()) return;
  for (absl::string_view line :
       absl::StrSplit(batches_->stream().source()->DescribeProgress(*g), '\n')) {
    absl::StrAppend(stages, "    ", line, "\n");
  }
}

std::string PipelineInstance::Explain() const {
  std::string stages;
  const proto::WorkSourceSpec& ws = config_.spec.work_source();
  if (const proto::TokenizeSpec* tokenize = pipeline::FindTokenize(config_.spec)) {
    absl::StrAppend(&stages, "    tokenize (at dataset open, into the token cache): ",
                    pipeline::DescribeTokenize(*tokenize), "\n");
    for (const auto& d : config_.datasets) {
      if (d->is_text()) AppendConversionLine("text", *d, &stages);
    }
  }
  for (const auto& d : config_.datasets) {
    // Record-format token datasets: converted into the token cache without tokenize.
    if (d->has_conversion_stats() && !d->is_text()) {
      AppendConversionLine(absl::StrCat(d->format(), " record"), *d, &stages);
    }
  }
  for (absl::string_view line : absl::StrSplit(config_.explain_stream, '\n', absl::SkipEmpty())) {
    absl::StrAppend(&stages, "    ", line, "\n");
    if (absl::StartsWith(line, "work source:")) {
      absl::StrAppend(&stages, "    work source order: seed=", ws.seed(),
                      " shuffle_shards=", ws.shuffle_shards() ? "true" : "false",
                      " shuffle_within_shard=", ws.shuffle_within_shard() ? "true" : "false",
                      " shuffle_block_size=",
                      ws.shuffle_block_size().empty() ? "off" : ws.shuffle_block_size(), "\n");
    }
  }
  AppendMixtureLines(&stages);
  AppendPackingLines(batches_->Packing(), &stages);
  pipeline::AppendMixtureLines(batches_->Mixture(), DatasetNames(config_.spec), &stages);
  if (config_.schema.loss_mask) {
    AppendLossMaskLines(config_.spec, config_.datasets, loss_masks_.Snapshot(), &stages);
  }
  const uint32_t parallelism = batches_->parallelism();
  return absl::StrCat(
      "instance ", config_.instance_id, "\n",
      "  data identity: run_id=", config_.identity.run_id.empty() ? "(single rank)" : config_.identity.run_id,
      " dp_degree=", config_.identity.dp_degree, " dp_group_id=", config_.identity.dp_group_id,
      " canonical_replicas=", config_.identity.canonical_replicas,
      " mapping_strategy=", pipeline::OptionName(config_.spec.mapping_strategy()),
      " spec_hash=", config_.spec_hash,
      "\n  owned lanes (round-robin order): ", absl::StrJoin(config_.owned_lanes, ","), "\n",
      "  stages (plan on the producer thread -> materialize -> ring, in stream order):\n",
      stages,
      "    ", batches_->Explain(), "\n",
      "    ring: ", config_.shm_name, " slots=", config_.geometry.slot_count,
      " slot_payload_bytes=", config_.geometry.slot_payload_bytes,
      " total_bytes=", writer_->total_bytes(), " readers=", attached_readers(),
      " produced=", produced_.load(), "\n",
      "  threads: 1 producer", parallelism > 1
          ? absl::StrCat(" + up to ", parallelism, " tasks at once on the shared worker pool")
          : std::string(" (materializes inline)"),
      "\n");
}

}  // namespace zephon::daemon
