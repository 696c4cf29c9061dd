#include "daemon/instance_registry.h"

#include <sys/resource.h>

#include <algorithm>
#include <time.h>
#include <unistd.h>

#include <google/protobuf/util/message_differencer.h>
#include <spdlog/spdlog.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/strings/str_format.h"
#include "common/mix.h"
#include "common/status_macros.h"
#include "common/logging.h"
#include "common/cache_dir.h"
#include "daemon/audit/audit_log.h"
#include "daemon/audit/step_anchors.h"
#include "daemon/pipeline/batching/group_stream.h"
#include "daemon/pipeline/batching/record_batch.h"
#include "daemon/checkpoint/checkpoint_file.h"
#include "daemon/checkpoint/aggregate_dir.h"
#include "daemon/checkpoint/dataset_content.h"
#include "daemon/checkpoint/mid_window.h"
#include "daemon/checkpoint/schedule_resume.h"
#include "daemon/pipeline/spec.h"
#include "daemon/pipeline/spec_string_form.h"
#include "daemon/storage/open_store.h"
#include "shm/ring_layout.h"

namespace zephon::daemon {
namespace {

// Where an instance of run `run_key` appends its audit log: under zephond --audit-dir
// when set, else under <aggregate_dir>/<run>/audit when its ranks asked (audit=True);
// "" = no audit. INVALID_ARGUMENT when asked with no local place to write.
absl::StatusOr<std::string> AuditDirOf(const std::string& daemon_audit_dir, bool asked,
                                       const std::string& aggregate_dir,
                                       const std::string& run_id,
                                       const std::string& run_key) {
  // An unnamed run's key ("local-N") starts again at 1 in every daemon: its directory
  // also carries the daemon's pid and the time, so two such runs never share one.
  const std::string run =
      run_id.empty() ? absl::StrCat(run_key, "-", getpid(), "-", absl::ToUnixMillis(absl::Now()))
                     : run_key;
  if (!daemon_audit_dir.empty()) return audit::DaemonAuditDir(daemon_audit_dir, run);
  if (!asked) return std::string();
  if (aggregate_dir.empty()) {
    return absl::InvalidArgumentError(
        "audit=True needs aggregate_dir (the log goes to <aggregate_dir>/<run_id>/audit), "
        "or a zephond started with --audit-dir");
  }
  if (absl::StartsWith(aggregate_dir, "s3://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "audit=True writes a local log, but aggregate_dir is ", aggregate_dir,
        ": start zephond with --audit-dir on a local or shared file system"));
  }
  return audit::AggregateAuditDir(aggregate_dir, run);
}

// Longest an attach waits on the store for the leader file (retries included): a store
// that hangs fails the attach with its error instead of stalling it for minutes.
constexpr absl::Duration kLeaderWriteBudget = absl::Seconds(30);

// Longest a rank waits for a DP-group peer's dataset open before opening its own.
constexpr absl::Duration kPeerOpenWait = absl::Minutes(10);

// Shards of one text dataset converted at once (dataset.h: OpenOptions::shards_at_once).
// Two keep the worker pool fed while one shard starts or commits its cache; more would
// only add converting threads and memory (each holds 2 x the pool's threads of blocks).
constexpr int kTextShardsAtOnce = 2;

std::shared_ptr<spdlog::logger> Log() { return SubsystemLogger("instance"); }

// The data identity ranks share an instance by: run, DP degree and DP group.
std::string InstanceKey(const std::string& run_key, const RankIdentity& identity) {
  return absl::StrCat(run_key, "/dp", identity.dp_degree, "/g", identity.dp_group_id);
}

// Stage 3's check when resuming: the files and the spec must be those the checkpoint
// was taken with, except what a restore may change: the batch operator and
// flush_every_k_chunks (checkpoint/spec_change.h), or a curriculum's future
// (schedule_resume.h; its schedule history then goes into *resume_state). The files
// first: the hash cannot see bytes rewritten at the same size, and a mismatch there
// names the file and the property that changed. A schedule change together with a
// batch or flush change is checked in two steps: the schedule against the checkpoint
// with this Pipeline's batching reverted to the checkpoint's (so nothing else may
// differ, and the past bound is the checkpoint's), then the batching against the
// checkpoint's spec carrying the new schedule.
absl::StatusOr<checkpoint::ResumedSpecChanges> CheckResumedData(
    proto::CheckpointState* resume_state,
    const std::vector<std::shared_ptr<const pipeline::Dataset>>& datasets,
    const proto::PipelineSpec& spec, const std::string& spec_hash) {
  const proto::CheckpointState& resume = *resume_state;
  if (resume.datasets_size() > 0) {
    ASSIGN_OR_RETURN(std::vector<proto::DatasetContent> contents,
                     checkpoint::DescribeDatasets(datasets, spec.work_source().weight_by()));
    RETURN_IF_ERROR(checkpoint::CompareDatasets(resume.datasets(), contents));
  }
  const auto hash_of = [&datasets](const proto::PipelineSpec& s) {
    return pipeline::SpecHash(s, datasets);
  };
  std::vector<proto::ScheduleRevision> history;
  ASSIGN_OR_RETURN(const bool accepted,
                   checkpoint::AcceptSchedule(resume, spec, spec_hash, hash_of, &history));
  if (accepted) {
    *resume_state->mutable_schedule_history() = {history.begin(), history.end()};
    return checkpoint::ResumedSpecChanges{};
  }
  if (resume.spec().work_source().schedule_size() > 0 &&
      spec.work_source().schedule_size() > 0) {
    const proto::PipelineSpec at_saved_batching =
        checkpoint::WithBatchingOf(spec, resume.spec());
    const std::string at_saved_hash = hash_of(at_saved_batching);
    ASSIGN_OR_RETURN(const bool schedule_ok,
                     checkpoint::AcceptSchedule(resume, at_saved_batching, at_saved_hash,
                                                hash_of, &history));
    if (schedule_ok) {
      // The checkpoint as if taken under the new schedule: only its spec and hash are
      // read by CheckResumedSpec.
      proto::CheckpointState rescheduled;
      *rescheduled.mutable_spec() = resume.spec();
      *rescheduled.mutable_spec()->mutable_work_source()->mutable_schedule() =
          spec.work_source().schedule();
      rescheduled.mutable_spec()->mutable_work_source()->set_interpolate(
          spec.work_source().interpolate());
      rescheduled.set_spec_hash(hash_of(rescheduled.spec()));
      ASSIGN_OR_RETURN(checkpoint::ResumedSpecChanges changes,
                       checkpoint::CheckResumedSpec(rescheduled, spec, spec_hash, datasets));
      *resume_state->mutable_schedule_history() = {history.begin(), history.end()};
      return changes;
    }
  }
  return checkpoint::CheckResumedSpec(resume, spec, spec_hash, datasets);
}

// How long an attach waits for a reader of the same run and rank to go before calling
// it a second job (RefuseSecondJob): a killed or detaching rank's stream closes within
// milliseconds on a Unix socket.
constexpr absl::Duration kSecondJobGrace = absl::Seconds(3);

// Longest one store call for an s3:// tokenizer may take (retries included): a 9 MB
// tokenizer.json is seconds on any link; a hung store fails the attach naming the URL.
constexpr absl::Duration kTokenizerCallBudget = absl::Minutes(1);

// The registry's tokenizers: the daemon's shared cache, else one of its own.
std::shared_ptr<TokenizerCache> TokenizersOf(const RegistryOptions& options) {
  if (options.tokenizers != nullptr) return options.tokenizers;
  return std::make_shared<TokenizerCache>(
      [s3 = options.s3, env = options.env](const std::string& url) {
        return storage::OpenStore(url, s3, kTokenizerCallBudget, env);
      });
}

// Once per text or record shard this open converted: the records it changed or skipped
// (a warm open from the token cache was logged when it was converted).
void LogTextShards(const std::vector<std::shared_ptr<const pipeline::Dataset>>& datasets) {
  for (const auto& d : datasets) {
    for (uint32_t s = 0; d->has_conversion_stats() && s < d->NumShards(); ++s) {
      const pipeline::TextShardStats* st = d->ShardTextStats(s);
      if (!st->tokenized) continue;
      if (st->invalid_utf8_records > 0 || st->skipped_missing > 0) {
        Log()->warn("dataset '{}' file {}: {} records with invalid UTF-8 (replaced by U+FFFD), "
                    "{} records skipped without a string text field (on_missing=skip), of {}",
                    d->name(), d->shard(s).FileName(), st->invalid_utf8_records,
                    st->skipped_missing, st->records);
      }
      if (st->null_records > 0) {
        Log()->warn("dataset '{}' file {}: {} null records skipped (on_null=skip), of {}",
                    d->name(), d->shard(s).FileName(), st->null_records, st->records);
      }
    }
  }
}

}  // namespace

InstanceRegistry::InstanceRegistry(RegistryOptions options)
    : options_(std::move(options)),
      tokenizers_(TokenizersOf(options_)),
      started_(options_.env->Now()),
      idle_since_(options_.env->Now()) {}

InstanceRegistry::~InstanceRegistry() { CloseAll(); }

absl::StatusOr<Attachment> InstanceRegistry::Attach(const proto::AttachRequest& request) {
  // An attach in progress counts as activity: an idle daemon must not exit under it.
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("zephond is shutting down");
    ++attaching_;
  }
  absl::StatusOr<Attachment> out = AttachUnlocked(request);
  absl::MutexLock lock(&mu_);
  --attaching_;
  if (instances_.empty()) idle_since_ = options_.env->Now();
  return out;
}

absl::StatusOr<Attachment> InstanceRegistry::AttachUnlocked(const proto::AttachRequest& request) {
  std::optional<Resume> resume;
  if (!request.restore_checkpoint().empty()) {
    resume.emplace();
    ASSIGN_OR_RETURN(resume->state, checkpoint::DecodeCheckpoint(request.restore_checkpoint()));
    resume->key = absl::StrFormat("%016x", HashBytes(request.restore_checkpoint()));
  }
  // 1. Validate: every option defaulted and checked once.
  ASSIGN_OR_RETURN(ResolvedAttach attach,
                   ResolveAttach(request, resume ? &resume->state : nullptr,
                                 AttachDefaults{options_.reader_capacity,
                                                options_.default_prefetch_batches}));
  // The tokenizer, before any dataset I/O and before the rendezvous: a bad tokenizer
  // fails the attach at once. From here the spec holds the loaded tokenizer's
  // fingerprint and no inline tokenizer bytes (it is stored in checkpoints).
  ASSIGN_OR_RETURN(const std::optional<pipeline::TextTokenization> text,
                   PrepareTokenize(*tokenizers_, &attach.pipeline.spec));
  // One rank of a named run attached twice is two live jobs under one run_id.
  RETURN_IF_ERROR(RefuseSecondJob(attach.identity, request.client_pid()));
  // 2. Rendezvous if this daemon leads the run.
  RETURN_IF_ERROR(RendezvousIfLeader(attach.identity));
  // 3. The datasets for the spec. The open this rank led stays visible to its peers
  // until the instance is registered (or this attach fails): the guard runs after
  // JoinOrCreate released the registry lock.
  ASSIGN_OR_RETURN(const OpenedDatasets opened,
                   DatasetsFor(attach.identity, attach.pipeline.spec, text ? &*text : nullptr));
  const absl::Cleanup forget_pending = [this, &opened] { ForgetPendingOpen(opened); };
  if (attach.schema.records) {
    // A record row is a whole sample: its slot holds microbatch_size of the longest.
    // One pass over the length tables, here and not under the registry lock.
    const pipeline::RecordBounds longest =
        pipeline::LongestRecord(opened.datasets, attach.schema.payload);
    attach.schema.record_tokens = longest.tokens;
    attach.schema.record_payload_bytes = longest.payload_bytes;
    attach.geometry.slot_payload_bytes = attach.schema.SlotPayloadBytes();
  }
  if (resume) {
    ASSIGN_OR_RETURN(resume->changes, CheckResumedData(&resume->state, opened.datasets,
                                                       attach.pipeline.spec, opened.spec_hash));
    if (resume->changes.batch || resume->changes.saved_flush_every_k_chunks != 0) {
      Log()->info("resuming run '{}' from checkpoint round {} with {}{}", resume->state.run_id(),
                  resume->state.round(),
                  resume->changes.batch
                      ? (resume->changes.saved_flush_every_k_chunks != 0
                             ? "another batch(microbatch_size, drop_last) and "
                             : "another batch(microbatch_size, drop_last)")
                      : "",
                  resume->changes.saved_flush_every_k_chunks != 0
                      ? absl::StrCat("flush_every_k_chunks changed from ",
                                     resume->changes.saved_flush_every_k_chunks, " to ",
                                     attach.pipeline.spec.flush_every_k_chunks())
                      : "");
    }
  }
  // 4. Join or create.
  return JoinOrCreate(request, attach, resume ? &*resume : nullptr, opened);
}

absl::Status InstanceRegistry::RendezvousIfLeader(const RankIdentity& identity) const {
  if (identity.global_rank != 0 || identity.world_size <= 1 || identity.aggregate_dir.empty()) {
    return absl::OkStatus();
  }
  // This daemon hosts rank 0: it leads the run's checkpoint rounds, and followers find
  // it through the rendezvous file (which says so when this daemon serves no peers).
  // Written outside the registry lock (it may sit on a slow shared filesystem or object
  // store); a stale file naming us is harmless. A store that refuses the write (bad
  // credentials, missing bucket) fails the attach here, naming the object, instead of
  // stalling the first checkpoint.
  ASSIGN_OR_RETURN(std::unique_ptr<checkpoint::AggregateDir> aggregate,
                   checkpoint::AggregateDir::Open(identity.aggregate_dir, options_.s3,
                                                    kLeaderWriteBudget, options_.env));
  return aggregate->WriteLeader(identity.run_id, options_.peer_address, options_.daemon_label,
                                options_.daemon_instance);
}

absl::StatusOr<Attachment> InstanceRegistry::JoinOrCreate(const proto::AttachRequest& request,
                                                          const ResolvedAttach& attach,
                                                          const Resume* resume,
                                                          const OpenedDatasets& opened) {
  const RankIdentity& identity = attach.identity;
  const std::string restore_key = resume != nullptr ? resume->key : "";
  const std::string& spec_hash = opened.spec_hash;
  absl::MutexLock lock(&mu_);
  if (shutting_down_) return absl::UnavailableError("zephond is shutting down");
  std::string run_key = identity.run_id;
  if (run_key.empty()) run_key = absl::StrCat("local-", ++anonymous_runs_);
  const std::string key = InstanceKey(run_key, identity);
  std::string reused_run_warning;

  Attachment out;
  // How many reader slots a new instance holds at the stream's start.
  uint32_t reserve = identity.local_peers;
  auto it = instances_.find(key);
  if (it != instances_.end() && !it->second.back()->poisoned()) {
    PipelineInstance& running = *it->second.back();
    if (running.config().restore_key != restore_key) {
      return absl::FailedPreconditionError(absl::StrCat(
          "restored state mismatch for run_id='", identity.run_id, "' dp_degree=",
          identity.dp_degree, " dp_group_id=", identity.dp_group_id, ": this rank ",
          restore_key.empty() ? "restores no checkpoint" : "restores checkpoint " + restore_key,
          " but its DP-group peers on this node ",
          running.config().restore_key.empty() ? "started fresh"
                                               : "restored " + running.config().restore_key,
          ". Every rank of a run must restore the same checkpoint bytes"));
    }
    if (running.config().spec_hash != spec_hash) {
      return absl::FailedPreconditionError(absl::StrCat(
          "spec hash mismatch for run_id='", identity.run_id, "' dp_degree=", identity.dp_degree,
          " dp_group_id=", identity.dp_group_id, ": this rank's pipeline has spec hash ",
          spec_hash, " but its DP-group peers on this node run spec hash ",
          running.config().spec_hash,
          ". Every Pipeline that shares a dp_group_id must be built from identical datasets, "
          "work source, operators and options"));
    }
    if (running.config().schema.payload != attach.schema.payload) {
      // keep_payload is outside the spec hash (no sample changes) but not the slot layout.
      return absl::FailedPreconditionError(absl::StrCat(
          "record payload mismatch for run_id='", identity.run_id, "' dp_degree=",
          identity.dp_degree, " dp_group_id=", identity.dp_group_id, ": this rank ",
          attach.schema.payload ? "keeps" : "does not keep", " the source records "
          "(tokenize preserve_upstream_payload) but its DP-group peers on this node ",
          running.config().schema.payload ? "do" : "do not",
          ". Every Pipeline that shares a dp_group_id must be built alike"));
    }
    absl::Status attached =
        running.AttachReader(identity.global_rank, request.client_pid(), &out.reply);
    if (attached.ok()) {
      out.instance = it->second.back();
    } else if (absl::IsFailedPrecondition(attached)) {
      // Regeneration: a fresh instance from the start, for this rank alone.
      reserve = 1;
      out.reply.add_warnings(absl::StrCat(
          "rank ", identity.global_rank, " attached after its DP-group peers had consumed past "
          "the ring; it gets its own pipeline instance from the start of the stream (same "
          "batches, duplicated work). Set local_peers to the number of ranks of a DP group on "
          "this node to share one instance"));
      Log()->warn("run={} instance={} rank={} ring={} gen={}: {}", run_key,
                  running.config().instance_id, identity.global_rank,
                  running.config().shm_name, running.ring_generation(), out.reply.warnings(0));
    } else {
      return attached;
    }
  }
  if (out.instance == nullptr) {
    if (opened.source != nullptr && opened.source->poisoned()) {
      // The datasets came from this DP group's instance, which failed meanwhile: they may
      // be what failed it (an object replaced under the run). Do not build on them.
      return absl::UnavailableError(absl::StrCat(
          "the pipeline instance of run_id='", identity.run_id, "' dp_group_id=",
          identity.dp_group_id, " failed while this rank attached (see zephond's log and "
          "its other ranks' errors); restart the job or retry the attach"));
    }
    // A fresh run, or one continuing another run's checkpoint (its lineage), under the
    // id of a run that ended (a job restarted, a test run again): its rounds are its
    // own, so the old run's finished rounds are forgotten. A restore of this run's own
    // checkpoint continues that run: its rounds stand.
    const bool new_run = resume == nullptr || resume->state.run_id() != identity.run_id;
    if (new_run && !identity.run_id.empty() && !HasInstanceOfRun(run_key) &&
        options_.forget_finished_rounds) {
      if (const size_t forgotten = options_.forget_finished_rounds(run_key); forgotten > 0) {
        reused_run_warning = absl::StrCat(
            "run_id='", identity.run_id, "' was used by a run that ended: its ", forgotten,
            " finished checkpoint round(s) on this daemon are forgotten, and this run's ",
            resume == nullptr ? "rounds start again at 0"
                              : absl::StrCat("rounds go on from round ",
                                             resume->state.round() + 1, " (it continues run '",
                                             resume->state.run_id(), "')"),
            identity.aggregate_dir.empty()
                ? std::string()
                : absl::StrCat(" and replace its checkpoints under ", identity.aggregate_dir,
                               "/", identity.run_id),
            ". Use a new run_id to keep both runs, or restore() to continue the old one");
      }
    }
    ASSIGN_OR_RETURN(out.instance,
                     CreateInstance(request, attach, opened, resume, key, run_key, reserve));
    RETURN_IF_ERROR(
        out.instance->AttachReader(identity.global_rank, request.client_pid(), &out.reply));
    instances_[key].push_back(out.instance);
  }
  out.reader_index = out.reply.reader_index();
  out.reply.set_next_round(out.instance->config().next_round);
  out.reply.set_producer_timeout_ms(attach.limits.producer_timeout_ms);
  out.reply.set_ring_slots(out.instance->config().geometry.slot_count);
  std::vector<std::string> warnings = identity.warnings;
  if (!reused_run_warning.empty()) warnings.push_back(reused_run_warning);
  if (resume != nullptr && resume->state.dp_degree() != 0 &&
      (resume->state.dp_degree() != identity.dp_degree || resume->changes.mapping)) {
    // Upstream warns here too: such a checkpoint restores exactly, but on another
    // topology (dp_degree, or which group owns which lanes) the following steps hold
    // other batch sets than the saving one's would.
    if (const std::optional<std::string> mid = checkpoint::MidWindowWarning(resume->state)) {
      warnings.push_back(absl::StrCat(
          "restoring on dp_degree=", identity.dp_degree, " mapping_strategy=",
          pipeline::OptionName(attach.pipeline.spec.mapping_strategy()),
          " a checkpoint saved on dp_degree=", resume->state.dp_degree(), " mapping_strategy=",
          pipeline::OptionName(resume->state.spec().mapping_strategy()),
          " and taken mid-window: ", *mid));
    }
  }
  for (const std::string& w : warnings) {
    out.reply.add_warnings(w);
    Log()->warn("run={} instance={} rank={} ring={} gen={}: {}", run_key,
                out.instance->config().instance_id, identity.global_rank,
                out.instance->config().shm_name, out.reply.ring_generation(), w);
  }
  return out;
}

absl::StatusOr<InstanceRegistry::OpenedDatasets> InstanceRegistry::DatasetsFor(
    const RankIdentity& identity, const proto::PipelineSpec& resolved,
    const pipeline::TextTokenization* text) {
  std::shared_ptr<PipelineInstance> peer;
  std::shared_ptr<PendingOpen> theirs;
  OpenedDatasets out;
  if (!identity.run_id.empty()) {
    // One look at both: a running instance of this DP group, else an open in progress
    // (kept until its instance is registered, so no rank falls between the two).
    const std::string key = InstanceKey(identity.run_id, identity);
    absl::MutexLock lock(&mu_);
    if (auto it = instances_.find(key); it != instances_.end() && !it->second.back()->poisoned()) {
      peer = it->second.back();
    } else {
      std::shared_ptr<PendingOpen>& slot = opening_[key];
      if (slot == nullptr) {
        slot = out.pending = std::make_shared<PendingOpen>();
        out.pending->spec = resolved;
        out.pending_key = key;
      } else if (google::protobuf::util::MessageDifferencer::Equals(slot->spec, resolved)) {
        theirs = slot;
      }
    }
  }
  if (peer != nullptr &&
      google::protobuf::util::MessageDifferencer::Equals(resolved, peer->config().spec)) {
    // Joining a running instance of the identical spec: its datasets are what this rank
    // will read, so no dataset I/O (for s3:// no listing, no .idx copy per rank).
    out.datasets = peer->config().datasets;
    out.spec_hash = peer->config().spec_hash;
    out.source = peer;
    return out;
  }
  if (theirs != nullptr) {
    // A DP-group peer is opening the same datasets: wait for its result (its open is
    // bounded by the store's timeouts; shutdown ends the wait at once).
    absl::MutexLock lock(&mu_);
    const auto done = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return theirs->done || shutting_down_;
    };
    mu_.AwaitWithTimeout(absl::Condition(&done), kPeerOpenWait);
    if (shutting_down_) return absl::UnavailableError("zephond is shutting down");
    if (theirs->done && theirs->result.ok()) {
      out.datasets = theirs->result->datasets;
      out.spec_hash = theirs->result->spec_hash;
      return out;
    }
    // Its open failed (its error may not be ours) or took over kPeerOpenWait: open ours.
  }
  pipeline::OpenOptions open_options;
  open_options.cache_dir = options_.cache_dir;
  open_options.max_jsonl_line_bytes = options_.max_jsonl_line_bytes;
  open_options.shard_cache = options_.shard_cache;
  open_options.token_cache = options_.token_cache;
  open_options.s3 = options_.s3;
  open_options.text_convert.progress = &conversions_;
  if (text != nullptr && options_.worker_pool != nullptr) {
    // Text shards tokenize on the node's worker pool (blocks the pool cannot take run
    // on this thread: text_convert.h); twice its threads keeps it busy.
    std::shared_ptr<exec::WorkerPool> pool = options_.worker_pool;
    open_options.text_convert.submit = [pool](std::function<void()> task) {
      return pool->Submit(std::move(task)).ok();
    };
    open_options.text_convert.max_blocks_in_flight = static_cast<int>(2 * pool->num_threads());
    open_options.shards_at_once = kTextShardsAtOnce;
  }
  absl::StatusOr<std::vector<std::shared_ptr<const pipeline::Dataset>>> datasets =
      pipeline::OpenDatasets(resolved, open_options, text);
  if (datasets.ok()) {
    out.datasets = *std::move(datasets);
    LogTextShards(out.datasets);
    out.spec_hash = pipeline::SpecHash(resolved, out.datasets);
  }
  if (out.pending != nullptr) {
    absl::MutexLock lock(&mu_);
    out.pending->result = datasets.ok() ? absl::StatusOr<DatasetsAndHash>(
                                              DatasetsAndHash{out.datasets, out.spec_hash})
                                        : absl::StatusOr<DatasetsAndHash>(datasets.status());
    out.pending->done = true;
  }
  if (!datasets.ok()) {
    ForgetPendingOpen(out);
    return datasets.status();
  }
  return out;
}

void InstanceRegistry::ForgetPendingOpen(const OpenedDatasets& opened) {
  if (opened.pending == nullptr) return;
  absl::MutexLock lock(&mu_);
  ForgetPendingOpenLocked(opened);
}

void InstanceRegistry::ForgetPendingOpenLocked(const OpenedDatasets& opened) {
  if (opened.pending == nullptr) return;
  auto it = opening_.find(opened.pending_key);
  if (it != opening_.end() && it->second == opened.pending) opening_.erase(it);
}

absl::StatusOr<std::shared_ptr<PipelineInstance>> InstanceRegistry::CreateInstance(
    const proto::AttachRequest& request, const ResolvedAttach& attach,
    const OpenedDatasets& opened, const Resume* resume, const std::string& key,
    const std::string& run_key, uint32_t reserve) {
  ASSIGN_OR_RETURN(std::unique_ptr<pipeline::GroupStream> stream,
                   pipeline::GroupStream::Create(attach.pipeline, opened.datasets,
                                                 attach.owned_lanes,
                                                 resume ? &attach.lane_starts : nullptr,
                                                 resume ? resume->changes.saved_flush_every_k_chunks
                                                        : 0));
  const uint64_t serial = ++created_total_;

  InstanceConfig config;
  config.instance_id = absl::StrCat(key, "/", opened.spec_hash.substr(0, 8), "#", serial);
  config.spec_hash = opened.spec_hash;
  config.datasets = opened.datasets;
  config.identity = attach.identity;
  config.owned_lanes = attach.owned_lanes;
  config.schema = attach.schema;
  config.shm_name = absl::StrCat(options_.shm_prefix, ".", getpid(), ".", serial);
  config.geometry = attach.geometry;
  if (options_.max_ring_bytes > 0) {
    const shm::RingSections sections = shm::ComputeSections(
        config.geometry.slot_count, config.geometry.reader_capacity,
        config.geometry.slot_payload_bytes);
    const uint64_t needed = sections.total_bytes + sections.cursor_bytes;
    uint64_t in_use = 0;
    for (const auto& [k, instances] : instances_) {
      for (const auto& instance : instances) in_use += instance->ring_bytes();
    }
    if (in_use + needed > options_.max_ring_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the ring for ", config.instance_id, " needs ", needed, " bytes but zephond's ring "
          "budget (--max-ring-bytes=", options_.max_ring_bytes, ") has ",
          options_.max_ring_bytes - std::min(in_use, options_.max_ring_bytes),
          " bytes left (", in_use, " in use by other instances). Lower prefetch_batches, "
          "microbatch_size or max_length",
          config.schema.records
              ? absl::StrCat(" (record batches: a slot holds microbatch_size samples of the "
                             "longest, ", config.schema.record_tokens, " tokens; tokenize "
                             "with max_length and truncation or split_long_samples bounds it)")
              : std::string(),
          ", or raise --max-ring-bytes"));
    }
  }
  if (request.execution().join_timeout_s() > 0) {
    config.join_timeout = absl::Seconds(request.execution().join_timeout_s());
  }
  ASSIGN_OR_RETURN(config.audit_dir,
                   AuditDirOf(options_.audit_dir, request.execution().audit(),
                              attach.identity.aggregate_dir, attach.identity.run_id, run_key));
  // Step anchors: positions counted from this spec's start, so not for a resume that
  // changed the batching or revised a curriculum's schedule.
  const bool positions_are_the_specs =
      resume == nullptr || (!resume->changes.batch &&
                            resume->changes.saved_flush_every_k_chunks == 0 &&
                            resume->state.schedule_history().empty());
  if (positions_are_the_specs && attach.pipeline.lanes.microbatch_size > 0 &&
      attach.pipeline.lanes.flush_every_k_chunks > 0) {
    config.anchor_dirs.push_back(audit::StepAnchorDir(
        options_.cache_dir.empty() ? DefaultCacheDir() : options_.cache_dir, opened.spec_hash));
    const std::string& aggregate_dir = attach.identity.aggregate_dir;
    if (!aggregate_dir.empty() && !attach.identity.run_id.empty() &&
        !absl::StartsWith(aggregate_dir, "s3://")) {
      // Shared by the run's nodes: one `which --anchors` finds every lane's.
      config.anchor_dirs.push_back(audit::StepAnchorDir(
          absl::StrCat(aggregate_dir, "/", attach.identity.run_id), opened.spec_hash));
    }
    config.flush_every_k_chunks = attach.pipeline.lanes.flush_every_k_chunks;
    config.microbatch_size = attach.pipeline.lanes.microbatch_size;
  }
  config.reserved_readers = reserve;
  config.restore_key = resume != nullptr ? resume->key : "";
  config.run_key = run_key;
  config.next_round = resume != nullptr ? resume->state.round() + 1 : 0;
  if (resume != nullptr) {
    config.schedule_history.assign(resume->state.schedule_history().begin(),
                                   resume->state.schedule_history().end());
    config.lineage.assign(resume->state.lineage().begin(), resume->state.lineage().end());
    if (!resume->state.run_id().empty() && resume->state.run_id() != attach.identity.run_id) {
      proto::RunLineage parent;
      parent.set_run_id(resume->state.run_id());
      parent.set_round(resume->state.round());
      config.lineage.push_back(parent);
    }
  }
  config.explain_stream = stream->Explain();
  config.materialize.parallelism = attach.limits.parallelism;
  config.materialize.queue_capacity = 0;  // 2 x effective parallelism
  config.spec = attach.pipeline.spec;
  config.env = options_.env;
  return PipelineInstance::Create(std::move(config), std::move(stream), options_.worker_pool,
                                  options_.counters);
}

void InstanceRegistry::Detach(const Attachment& attachment, bool died) {
  bool shutting_down = false;
  {
    absl::MutexLock lock(&mu_);
    shutting_down = shutting_down_;
  }
  // Streams cut by our own shutdown are not deaths: nobody's peer is lost.
  attachment.instance->DetachReader(attachment.reader_index, died && !shutting_down);
  std::shared_ptr<PipelineInstance> doomed;
  {
    absl::MutexLock lock(&mu_);
    if (attachment.instance->attached_readers() > 0) return;
    for (auto it = instances_.begin(); it != instances_.end(); ++it) {
      auto& group = it->second;
      auto pos = std::find(group.begin(), group.end(), attachment.instance);
      if (pos == group.end()) continue;
      doomed = *pos;
      group.erase(pos);
      if (group.empty()) instances_.erase(it);
      break;
    }
    if (instances_.empty()) idle_since_ = options_.env->Now();
  }
  // Destroyed outside the lock: joining the producer may take a moment.
  if (doomed) Log()->info("instance {}: last reader left", doomed->config().instance_id);
}

uint64_t InstanceRegistry::DownloadedBytes() const {
  return options_.shard_cache == nullptr ? 0 : options_.shard_cache->Stats().bytes_downloaded;
}

proto::StatusReply InstanceRegistry::Status() const {
  proto::StatusReply reply;
  // The shard cache's stats first, without mu_: two locks never nest here, and a scrape
  // adds nothing to Attach and Detach latency.
  if (options_.shard_cache != nullptr) {
    const storage::ShardCacheStats c = options_.shard_cache->Stats();
    proto::ShardCacheStatus* out = reply.mutable_shard_cache();
    out->set_dir(c.dir);
    out->set_on_disk(c.on_disk);
    out->set_limit_bytes(c.limit_bytes);
    out->set_block_bytes(c.block_bytes);
    out->set_resident_bytes(c.resident_bytes);
    out->set_pinned_bytes(c.pinned_bytes);
    out->set_entries(c.entries);
    out->set_hits(c.hits);
    out->set_misses(c.misses);
    out->set_waits(c.waits);
    out->set_downloads(c.downloads);
    out->set_bytes_downloaded(c.bytes_downloaded);
    out->set_evictions(c.evictions);
    out->set_errors(c.errors);
    out->set_adopted(c.adopted);
    out->set_rejected(c.rejected);
  }
  if (options_.token_cache != nullptr) {
    const pipeline::TokenCacheStats t = options_.token_cache->Stats();
    proto::TokenCacheStatus* out = reply.mutable_token_cache();
    out->set_dir(t.dir);
    out->set_entries(t.entries);
    out->set_bytes(t.bytes);
    out->set_budget_bytes(t.budget_bytes);
    out->set_pinned_bytes(t.pinned_bytes);
    out->set_over_budget(t.over_budget);
    out->set_hits(t.hits);
    out->set_misses(t.misses);
    out->set_bytes_built(t.bytes_built);
    out->set_evictions(t.evictions);
    out->set_evicted_bytes(t.evicted_bytes);
    out->set_adopted(t.adopted);
    out->set_stale_removed(t.stale_removed);
  }
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, group] : instances_) {
      for (const auto& instance : group) *reply.add_instances() = instance->Status();
    }
    reply.set_instances_created_total(created_total_);
  }
  reply.set_pid(getpid());
  reply.set_ring_abi_major(shm::kLayoutMajor);
  reply.set_ring_abi_minor(shm::kLayoutMinor);
  reply.set_shm_prefix(options_.shm_prefix);
  reply.set_socket(options_.daemon_label);
  reply.set_metrics_address(options_.metrics_address);
  reply.set_peer_address(options_.peer_address);
  reply.set_uptime_s(absl::ToDoubleSeconds(options_.env->Now() - started_));
  reply.set_start_time_unix_s(absl::ToDoubleSeconds(started_ - absl::UnixEpoch()));
  if (options_.counters != nullptr) {
    const metrics::DaemonCounters& counters = *options_.counters;
    proto::CheckpointRoundsStatus* rounds = reply.mutable_checkpoint_rounds();
    rounds->set_ok(counters.rounds_ok());
    rounds->set_error(counters.rounds_error());
    rounds->set_timeout(counters.rounds_timeout());
    if (const auto last = counters.last_round(); last.has_value()) {
      proto::LastCheckpointRound* out = rounds->mutable_last();
      out->set_run_id(last->run_id);
      out->set_round(last->round);
      out->set_result(metrics::RoundResultName(last->result));
      out->set_finished_unix_s(absl::ToDoubleSeconds(last->finished - absl::UnixEpoch()));
      out->set_seconds(absl::ToDoubleSeconds(last->finished - last->started));
      out->set_error(last->error);
    }
  }
  {
    const pipeline::ConversionProgress::Snapshot c = conversions_.Get();
    proto::ConversionStatus* out = reply.mutable_conversions();
    out->set_tokenized_bytes(c.text_bytes);
    out->set_files_done(c.files_done);
    out->set_active(c.active);
    out->set_current(c.current);
  }
  if (options_.s3.counters != nullptr) {
    for (const auto& [op, totals] : options_.s3.counters->Snapshot()) {
      proto::S3RequestStatus* s = reply.add_s3_requests();
      s->set_op(op);
      s->set_requests(totals.requests);
      s->set_retries(totals.retries);
      s->set_errors(totals.errors);
    }
  }
  timespec cpu{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  reply.set_process_cpu_s(static_cast<double>(cpu.tv_sec) + cpu.tv_nsec * 1e-9);
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  reply.set_peak_rss_bytes(static_cast<uint64_t>(usage.ru_maxrss) * 1024);
  reply.set_worker_threads(options_.worker_pool ? options_.worker_pool->num_threads() : 0);
  return reply;
}

absl::StatusOr<std::shared_ptr<PipelineInstance>> InstanceRegistry::FindInstance(
    const std::string& instance_id) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [key, group] : instances_) {
    for (const auto& instance : group) {
      if (instance->config().instance_id == instance_id) return instance;
    }
  }
  return absl::NotFoundError(absl::StrCat("no instance '", instance_id, "' in this zephond"));
}

absl::Status InstanceRegistry::RefuseSecondJob(const RankIdentity& identity,
                                               int64_t client_pid) {
  if (identity.run_id.empty()) return absl::OkStatus();
  const absl::Time deadline = options_.env->Now() + kSecondJobGrace;
  while (true) {
    std::optional<std::pair<int64_t, std::string>> holder;
    {
      absl::MutexLock lock(&mu_);
      if (shutting_down_) return absl::UnavailableError("zephond is shutting down");
      for (const auto& [key, group] : instances_) {
        for (const auto& instance : group) {
          // A poisoned instance's readers are leaving (their peers failed): a rank
          // re-attaching to recover is not a second job.
          if (instance->config().run_key != identity.run_id || instance->poisoned()) continue;
          if (std::optional<int64_t> pid = instance->PidOfRank(identity.global_rank)) {
            holder.emplace(*pid, instance->config().instance_id);
          }
        }
      }
    }
    if (!holder.has_value()) return absl::OkStatus();
    // A rank whose process just died or detached is still listed until its stream
    // closes: give it a moment before calling this a second job.
    if (options_.env->Now() >= deadline && holder->first == client_pid) {
      return absl::AlreadyExistsError(absl::StrCat(
          "run_id='", identity.run_id, "' global_rank=", identity.global_rank,
          " is already attached by this process (pid ", client_pid, ", instance ",
          holder->second, "): close() the earlier Pipeline of this rank before attaching "
          "another"));
    }
    if (options_.env->Now() >= deadline) {
      return absl::AlreadyExistsError(absl::StrCat(
          "run_id='", identity.run_id, "' global_rank=", identity.global_rank,
          " is already attached to this zephond (pid ", holder->first, ", instance ",
          holder->second, ") and pid ", client_pid, " attaches as the same rank: two live "
          "jobs under one run_id? Give each training run its own run_id (a restarted job "
          "may restore() under a new one), or stop the first job's ranks first"));
    }
    options_.env->SleepFor(absl::Milliseconds(50));
  }
}

bool InstanceRegistry::HasInstanceOfRun(const std::string& run_key) const {
  for (const auto& [key, group] : instances_) {
    for (const auto& instance : group) {
      if (instance->config().run_key == run_key && instance->attached_readers() > 0) {
        return true;
      }
    }
  }
  return false;
}

std::set<uint32_t> InstanceRegistry::LocalRanksOfRun(const std::string& run_key) const {
  absl::MutexLock lock(&mu_);
  std::set<uint32_t> ranks;
  for (const auto& [key, group] : instances_) {
    for (const auto& instance : group) {
      if (instance->config().run_key != run_key) continue;
      for (uint32_t r : instance->attached_ranks()) ranks.insert(r);
    }
  }
  return ranks;
}

std::optional<checkpoint::LedRun> InstanceRegistry::LedRun(const std::string& run_id) const {
  if (run_id.empty()) return std::nullopt;
  absl::MutexLock lock(&mu_);
  for (const auto& [key, group] : instances_) {
    for (const auto& instance : group) {
      const InstanceConfig& config = instance->config();
      if (config.run_key != run_id) continue;
      const std::vector<uint32_t> ranks = instance->attached_ranks();
      if (std::find(ranks.begin(), ranks.end(), 0u) == ranks.end()) continue;
      return checkpoint::LedRun{config.identity.world_size, config.identity.canonical_replicas,
                                config.spec_hash, config.identity.aggregate_dir};
    }
  }
  return std::nullopt;
}

absl::StatusOr<std::string> InstanceRegistry::Explain(const std::string& instance_id) const {
  absl::MutexLock lock(&mu_);
  std::string text;
  bool found = false;
  uint64_t ring_bytes = 0;
  uint64_t instances = 0;
  uint64_t parallelism = 0;
  for (const auto& [key, group] : instances_) {
    for (const auto& instance : group) {
      ++instances;
      ring_bytes += instance->ring_bytes();
      if (instance->parallelism() > 1) parallelism += instance->parallelism();
      if (!instance_id.empty() && instance->config().instance_id != instance_id) continue;
      absl::StrAppend(&text, instance->Explain());
      found = true;
    }
  }
  if (!instance_id.empty() && !found) {
    return absl::NotFoundError(absl::StrCat("no instance '", instance_id, "' in this zephond"));
  }
  const uint32_t workers = options_.worker_pool ? options_.worker_pool->num_threads() : 0;
  // Every instance has one producer thread; the worker pool is shared, so its threads
  // are counted once however many instances (ranks' DP groups) run.
  absl::StrAppend(&text, "node totals: instances=", instances, " producer_threads=", instances,
                  " worker_threads=", workers, " total_threads=", instances + workers,
                  " materialize_parallelism_sum=", parallelism, " ring_bytes=", ring_bytes,
                  " (the worker pool is shared by all instances)\n");
  return text;
}

void InstanceRegistry::Tick() {
  std::vector<std::shared_ptr<PipelineInstance>> all;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [key, group] : instances_) all.insert(all.end(), group.begin(), group.end());
  }
  const absl::Time now = options_.env->Now();
  for (const auto& instance : all) instance->Tick(now);
}

int InstanceRegistry::total_readers() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [key, group] : instances_) {
    for (const auto& instance : group) n += instance->attached_readers();
  }
  return n;
}

absl::Time InstanceRegistry::idle_since() const {
  absl::MutexLock lock(&mu_);
  return instances_.empty() && attaching_ == 0 ? idle_since_ : absl::InfiniteFuture();
}

void InstanceRegistry::BeginShutdown() {
  std::vector<std::shared_ptr<PipelineInstance>> all;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    for (const auto& [key, group] : instances_) all.insert(all.end(), group.begin(), group.end());
  }
  // Readers drain what was published, then get CANCELLED ("closed"), not a peer's death.
  for (const auto& instance : all) instance->Close();
}

void InstanceRegistry::CloseAll() {
  std::map<std::string, std::vector<std::shared_ptr<PipelineInstance>>> doomed;
  {
    absl::MutexLock lock(&mu_);
    doomed.swap(instances_);
  }
}

}  // namespace zephon::daemon
