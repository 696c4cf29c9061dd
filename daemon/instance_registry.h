// The daemon's table of PipelineInstances, keyed by data identity.
//
// Attach runs in named stages: validate (ResolveAttach, resolve_attach.h: every option
// defaulted and checked once), load the tokenizer of a tokenize operator (tokenizers.h:
// the spec then carries its fingerprint, not inline bytes), rendezvous if this daemon hosts the run's rank 0, the
// datasets for the spec (opened once per DP group and spec hash), then join the running
// instance of that (run_id, dp_degree, dp_group_id) or create one. The seed's first rule is enforced here: a rank whose
// spec hash differs from the one its DP group already runs with is refused, naming
// both hashes. An instance is destroyed when its last reader leaves.
//
// Thread-safety: thread-safe.
#ifndef ZEPHON_DAEMON_INSTANCE_REGISTRY_H_
#define ZEPHON_DAEMON_INSTANCE_REGISTRY_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/env.h"
#include "daemon/checkpoint/spec_change.h"
#include "daemon/checkpoint/led_run.h"
#include "daemon/checkpoint/local_rounds.h"
#include "daemon/exec/ordered_stage.h"
#include "daemon/exec/worker_pool.h"
#include "daemon/metrics/counters.h"
#include "daemon/pipeline/formats/conversion_progress.h"
#include "daemon/pipeline/formats/line_reader.h"
#include "daemon/pipeline/formats/token_cache.h"
#include "daemon/pipeline_instance.h"
#include "daemon/storage/s3_store.h"
#include "daemon/resolve_attach.h"
#include "daemon/storage/shard_cache.h"
#include "daemon/tokenizers.h"
#include "proto/checkpoint.pb.h"
#include "proto/zephon.pb.h"

namespace zephon::daemon {

struct RegistryOptions {
  // Prefix of the name of every ring memfd this daemon creates (no slash); it is also the
  // prefix of the legacy /dev/shm segments the daemon sweeps at start.
  std::string shm_prefix = "zephon";
  uint32_t default_prefetch_batches = 8;
  uint32_t reader_capacity = 32;
  // zephond --audit-dir: every instance appends its audit log under <audit_dir>/<run>/;
  // empty = only instances whose ranks set ExecutionOptions.audit, under
  // <aggregate_dir>/<run>/audit.
  std::string audit_dir;
  // Where converted dataset shards (JSONL -> token cache) live; empty = the default
  // ($XDG_CACHE_HOME/zephon or ~/.cache/zephon).
  std::string cache_dir;
  // Longest JSONL line converted into a token cache (--max-jsonl-line-bytes).
  uint64_t max_jsonl_line_bytes = pipeline::kDefaultMaxLineBytes;
  // The node's token cache (--token-cache-bytes), managing cache_dir's JSONL token
  // caches; null = unmanaged, no budget. Its stats are part of Status().
  std::shared_ptr<pipeline::TokenCache> token_cache;
  // The node's cache of dataset bytes read from object stores (s3:// datasets), shared
  // by every instance (--shard-cache-bytes); null = each s3:// dataset reads through a
  // private memory-only cache. Its stats are part of Status().
  std::shared_ptr<storage::ShardCache> shard_cache;
  // Where s3:// aggregate_dirs and datasets connect (--s3-* flags, S3OptionsFromFlags);
  // fields left empty come from the environment.
  storage::S3Options s3;
  // Advertised host:port of this daemon's peer service (written to the rendezvous file
  // when it hosts a run's rank 0); empty = no peer service.
  std::string peer_address;
  // Bound host:port of the Prometheus endpoint, reported by Status; empty = off.
  std::string metrics_address;
  // Name of this daemon in logs, reports and rendezvous files.
  std::string daemon_label;
  // Forgets the leader-side finished checkpoint rounds of a run (RoundAggregator::
  // ForgetRun), returning how many; called when a fresh (not restored) run takes an id
  // whose earlier run has no instance left here. Null = nothing to forget.
  std::function<size_t(const std::string& run_id)> forget_finished_rounds;
  // This zephond process's unique id, written to rendezvous files (AggregateDir's
  // LeaderRecord) so its checkpoint router recognizes them; empty = not written.
  std::string daemon_instance;
  // Node budget for the bytes of all rings together (both segments of each; 0 = only the
  // memory limit of zephond's cgroup).
  uint64_t max_ring_bytes = 0;
  // The daemon's one worker pool, shared by every instance (the node-wide thread
  // budget, --worker-threads). Null: every instance materializes inline.
  std::shared_ptr<exec::WorkerPool> worker_pool;
  // The node's tokenizers (tokenize operators), shared by every instance; null = the
  // registry makes its own, reading s3:// tokenizers with `s3`.
  std::shared_ptr<TokenizerCache> tokenizers;
  // Event counters of the daemon (attach/ring/pipeline errors); each registry gets its
  // own unless the daemon shares one.
  std::shared_ptr<metrics::DaemonCounters> counters =
      std::make_shared<metrics::DaemonCounters>();
  // The clock of uptime, idle time and reservation expiry, and where ring memfds come
  // from (each instance's InstanceConfig::env); must outlive the registry.
  Env* env = Env::Default();
};

// A decoded checkpoint a rank restores: where a new instance starts.
struct Resume {
  proto::CheckpointState state;
  std::string key;  // hash of the checkpoint bytes: ranks of a group must agree on it
  // What the resuming spec changed that a restore allows (batch, flush_every_k_chunks);
  // set by the resume check before the instance is created.
  checkpoint::ResumedSpecChanges changes;
};

// What one successful attach hands back to the transport.
struct Attachment {
  std::shared_ptr<PipelineInstance> instance;
  uint32_t reader_index = 0;
  proto::AttachReply reply;
};

class InstanceRegistry final : public checkpoint::RunRoster {
 public:
  explicit InstanceRegistry(RegistryOptions options);
  ~InstanceRegistry();

  absl::StatusOr<Attachment> Attach(const proto::AttachRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  void Detach(const Attachment& attachment, bool died) ABSL_LOCKS_EXCLUDED(mu_);
  // The node's text conversions (what a first attach of a text corpus waits on): the
  // transport reports them to waiting clients (conversion_progress.h).
  const pipeline::ConversionProgress& conversions() const { return conversions_; }
  // Bytes the node's shard cache downloaded from object stores so far (0 without one):
  // what a first attach of an s3:// dataset waits on. Thread-safe.
  uint64_t DownloadedBytes() const;

  // The daemon's status. Reads the shard and token caches' stats (brief locks of their own)
  // without holding mu_, so a scrape never adds to Attach or Detach latency; the reply
  // is not one atomic snapshot across cache and instances.
  proto::StatusReply Status() const ABSL_LOCKS_EXCLUDED(mu_);
  // The instance with this id, or NOT_FOUND.
  absl::StatusOr<std::shared_ptr<PipelineInstance>> FindInstance(const std::string& instance_id)
      const ABSL_LOCKS_EXCLUDED(mu_);
  // Global ranks attached now to instances of the run `run_key` (run_id or local-N).
  std::set<uint32_t> LocalRanksOfRun(const std::string& run_key) const override
      ABSL_LOCKS_EXCLUDED(mu_);
  // The run `run_id` as this daemon leads it (global_rank 0 of the run attached here): its
  // world_size, canonical_replicas, spec hash and aggregate_dir as its ranks attached
  // them. nullopt when this daemon does not lead the run. What the peer service holds
  // every remote report against.
  std::optional<checkpoint::LedRun> LedRun(const std::string& run_id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The Explain of one instance (`instance_id`) or of all (empty), then one line
  // "node totals: ..." over every instance of this daemon: instances, producer and
  // worker threads, total engine threads, ring bytes. NOT_FOUND for an unknown id.
  absl::StatusOr<std::string> Explain(const std::string& instance_id) const
      ABSL_LOCKS_EXCLUDED(mu_);

  // Heartbeats and reservation expiry of every instance.
  void Tick() ABSL_LOCKS_EXCLUDED(mu_);
  // Readers attached across all instances, and since when there were none.
  int total_readers() const ABSL_LOCKS_EXCLUDED(mu_);
  absl::Time idle_since() const ABSL_LOCKS_EXCLUDED(mu_);
  // First step of a shutdown: refuse new attaches, close every ring (readers drain
  // and then get CANCELLED), and treat streams that end from now on as clean detaches.
  void BeginShutdown() ABSL_LOCKS_EXCLUDED(mu_);
  // Drops every instance (daemon shutdown).
  void CloseAll() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct DatasetsAndHash {
    std::vector<std::shared_ptr<const pipeline::Dataset>> datasets;
    std::string spec_hash;
  };
  // A dataset open in progress for an instance key, awaited by its DP-group peers; kept
  // in opening_ until the instance it feeds is registered (or its attach fails).
  struct PendingOpen {
    proto::PipelineSpec spec;  // resolved; peers with another spec do not wait
    bool done = false;         // guarded by mu_
    absl::StatusOr<DatasetsAndHash> result = absl::UnknownError("not opened yet");  // mu_
  };
  struct OpenedDatasets {
    std::vector<std::shared_ptr<const pipeline::Dataset>> datasets;
    std::string spec_hash;
    // The running instance they were borrowed from, if any.
    std::shared_ptr<PipelineInstance> source;
    // The open this rank led (visible to peers in opening_[pending_key]), if any.
    std::shared_ptr<PendingOpen> pending;
    std::string pending_key;
  };

  // The datasets (and spec hash) a rank of `identity` reads: a running DP-group peer's
  // (same resolved spec), a peer's open in progress (waited for, at most kPeerOpenWait,
  // ended by shutdown), else newly opened (and announced to peers arriving meanwhile).
  // `text`: the spec's tokenize operator (null without one).
  absl::StatusOr<OpenedDatasets> DatasetsFor(const RankIdentity& identity,
                                             const proto::PipelineSpec& resolved,
                                             const pipeline::TextTokenization* text)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Removes the open `opened` led from opening_ (no-op when it led none).
  void ForgetPendingOpen(const OpenedDatasets& opened) ABSL_LOCKS_EXCLUDED(mu_);
  void ForgetPendingOpenLocked(const OpenedDatasets& opened) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The attach stages, in order; Attach counts the attach in progress around them.
  // No stage holds mu_ across I/O except JoinOrCreate (ring creation), as before.
  absl::StatusOr<Attachment> AttachUnlocked(const proto::AttachRequest& request)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Stage 2: when this daemon hosts global_rank 0 of a multi-rank run, writes the run's
  // rendezvous (leader) file naming our peer address. Store I/O, no lock; a store that
  // refuses the write fails the attach naming the object.
  absl::Status RendezvousIfLeader(const RankIdentity& identity) const ABSL_LOCKS_EXCLUDED(mu_);
  // Stage 4: under mu_, joins the running instance of the rank's data identity (same
  // restore key and spec hash, else FAILED_PRECONDITION naming both) or creates one
  // (also when the running one's ring moved past sequence 0: regeneration).
  absl::StatusOr<Attachment> JoinOrCreate(const proto::AttachRequest& request,
                                          const ResolvedAttach& attach, const Resume* resume,
                                          const OpenedDatasets& opened)
      ABSL_LOCKS_EXCLUDED(mu_);
  // A new instance and its ring, within the --max-ring-bytes budget (RESOURCE_EXHAUSTED
  // naming the sizes otherwise). `reserve` reader slots are held for local peers.
  absl::StatusOr<std::shared_ptr<PipelineInstance>> CreateInstance(
      const proto::AttachRequest& request, const ResolvedAttach& attach,
      const OpenedDatasets& opened, const Resume* resume, const std::string& key,
      const std::string& run_key, uint32_t reserve) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Refuses (ALREADY_EXISTS, naming both pids and the instance) an attach of a named
  // run's rank that a reader of this daemon already holds, after waiting up to
  // kSecondJobGrace for that reader to go (a rank that just died or detached is listed
  // until its stream closes). Unnamed runs (world_size 1, no run_id) are never refused.
  absl::Status RefuseSecondJob(const RankIdentity& identity, int64_t client_pid)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Whether an instance of `run_key` still has a reader attached here (one whose last
  // reader left is winding down: its run has ended on this daemon).
  bool HasInstanceOfRun(const std::string& run_key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RegistryOptions options_;
  const std::shared_ptr<TokenizerCache> tokenizers_;  // options_.tokenizers or our own
  pipeline::ConversionProgress conversions_;  // thread-safe; outlives every open
  const absl::Time started_;

  mutable absl::Mutex mu_;
  // Data-identity key -> instances (more than one only after regeneration).
  std::map<std::string, std::vector<std::shared_ptr<PipelineInstance>>> instances_
      ABSL_GUARDED_BY(mu_);
  // Instance key -> the dataset open its first rank is doing (removed when done).
  std::map<std::string, std::shared_ptr<PendingOpen>> opening_ ABSL_GUARDED_BY(mu_);
  uint64_t created_total_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t anonymous_runs_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time idle_since_ ABSL_GUARDED_BY(mu_);
  int attaching_ ABSL_GUARDED_BY(mu_) = 0;  // attaches in progress
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace zephon::daemon

#endif  // ZEPHON_DAEMON_INSTANCE_REGISTRY_H_
