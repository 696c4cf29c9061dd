#include "daemon/metrics/daemon_metrics.h"

#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>

namespace zephon::metrics {
namespace {

MetricFamily Family(const char* name, const char* type, const char* help) {
  MetricFamily f;
  f.name = name;
  f.type = type;
  f.help = help;
  return f;
}

Labels InstanceLabels(const proto::InstanceStatus& s) {
  return {{"instance_id", s.instance_id()},
          {"run", s.run_id()},
          {"dp_group", std::to_string(s.dp_group_id())}};
}

}  // namespace

ProcessStats ReadProcessStats(const std::string& shm_dir) {
  ProcessStats p;
  timespec cpu{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu);
  p.cpu_seconds = static_cast<double>(cpu.tv_sec) + cpu.tv_nsec * 1e-9;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    unsigned long long size = 0, resident = 0;
    if (std::fscanf(f, "%llu %llu", &size, &resident) == 2) {
      p.resident_bytes = resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
    }
    std::fclose(f);
  }
  struct statvfs vfs {};
  if (statvfs(shm_dir.c_str(), &vfs) == 0) {
    p.shm_free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
    p.shm_size_bytes = static_cast<uint64_t>(vfs.f_blocks) * vfs.f_frsize;
  }
  return p;
}

std::vector<MetricFamily> CollectDaemonMetrics(const proto::StatusReply& status,
                                               const DaemonCounters& counters,
                                               const ProcessStats& process) {
  MetricFamily produced = Family("zephon_batches_produced_total", "counter",
                                 "Batches published into the instance's ring.");
  MetricFamily released = Family("zephon_batches_released_total", "counter",
                                 "Batches released by every attached reader (min cursor).");
  // The old name of the same figure, kept for one release so dashboards can move over.
  MetricFamily delivered_alias =
      Family("zephon_batches_delivered_total", "counter",
             "Deprecated alias of zephon_batches_released_total (same value); it will be "
             "removed in the next release.");
  MetricFamily occupancy = Family("zephon_ring_occupancy", "gauge",
                                  "Published batches not yet released by every reader.");
  MetricFamily slots = Family("zephon_ring_slots", "gauge", "Slots of the instance's ring.");
  MetricFamily bytes = Family("zephon_ring_bytes", "gauge", "Bytes of the instance's ring.");
  MetricFamily readers = Family("zephon_readers_attached", "gauge",
                                "Ranks attached to the instance.");
  MetricFamily lag = Family("zephon_reader_lag_batches", "gauge",
                            "Batches produced but not yet released by this reader.");
  MetricFamily waiting = Family("zephon_reader_waiting", "gauge",
                                "1 while the reader waits for a batch (the ring holds none "
                                "it has not taken), else 0.");
  MetricFamily in_flight = Family("zephon_materialize_in_flight", "gauge",
                                  "Batches queued or running on the worker pool.");
  MetricFamily buffered = Family("zephon_materialize_buffered", "gauge",
                                 "Materialized batches waiting for their turn in order.");
  // Text datasets (tokenize): what their conversion found, per dataset of an instance.
  MetricFamily text_records = Family("zephon_text_records", "gauge",
                                     "Records (non-blank JSONL lines) of a text dataset.");
  MetricFamily text_tokens = Family("zephon_text_tokens", "gauge",
                                    "Tokens of a text dataset after tokenize.");
  MetricFamily text_invalid = Family("zephon_text_invalid_utf8_records", "gauge",
                                     "Records of a text dataset whose invalid UTF-8 was "
                                     "replaced by U+FFFD.");
  MetricFamily text_skipped = Family("zephon_text_skipped_records", "gauge",
                                     "Records of a text dataset skipped for a missing or "
                                     "non-string field (on_missing=skip).");
  MetricFamily text_null = Family("zephon_text_null_records", "gauge",
                                  "Null records of a record-format dataset (Parquet, MDS) "
                                  "skipped (on_null=skip).");
  // pack_flat, per lane of an instance (counted as batches are planned).
  MetricFamily pack_tokens = Family("zephon_pack_tokens_total", "counter",
                                    "Cells of packed records holding sample tokens.");
  MetricFamily pack_padding = Family("zephon_pack_padding_cells_total", "counter",
                                     "Pad cells of packed records (fill rate = tokens / "
                                     "(tokens + padding cells)).");
  MetricFamily pack_fill = Family("zephon_pack_fill_ratio", "gauge",
                                  "Tokens / (tokens + padding cells) of the lane so far.");
  MetricFamily pack_dropped_tokens = Family("zephon_pack_dropped_tokens_total", "counter",
                                            "Tokens pack_flat dropped (wrap's flush tails, "
                                            "oversized samples).");
  MetricFamily pack_dropped_samples = Family("zephon_pack_dropped_samples_total", "counter",
                                             "Samples longer than max_length dropped "
                                             "(drop_oversized).");
  MetricFamily pack_split_samples = Family("zephon_pack_split_samples_total", "counter",
                                           "Samples placed in more than one record "
                                           "(first_fit, best_fit, best_fit_wrap).");
  // SFT loss masks, per lane of an instance (counted as batches are written).
  MetricFamily mask_tokens = Family("zephon_loss_mask_tokens_total", "counter",
                                    "Real (non-padding) tokens of the batches written by a "
                                    "pipeline with loss masks.");
  MetricFamily mask_masked = Family("zephon_loss_mask_masked_tokens_total", "counter",
                                    "Those of them the loss mask masked (no loss).");
  MetricFamily mask_ratio = Family("zephon_loss_mask_masked_ratio", "gauge",
                                   "Masked / real tokens of the lane so far.");
  // ensure_mixture, per lane and dataset of an instance (samples entering pack_flat).
  MetricFamily mix_samples = Family("zephon_mixture_samples_total", "counter",
                                    "Samples ensure_mixture emitted into pack_flat.");
  MetricFamily mix_tokens = Family("zephon_mixture_tokens_total", "counter",
                                   "Tokens of the samples ensure_mixture emitted.");
  MetricFamily mix_dropped = Family("zephon_mixture_dropped_samples_total", "counter",
                                    "Samples ensure_mixture's exact mode dropped "
                                    "(max_buffer_size=None: the surplus at group ends).");
  MetricFamily mix_target = Family("zephon_mixture_target_share", "gauge",
                                   "The dataset's target share (in weight_by units).");
  MetricFamily mix_achieved = Family("zephon_mixture_achieved_share", "gauge",
                                     "The dataset's share of what the lane emitted so far.");
  // A curriculum, per instance: its phase and weights where its furthest lane stands.
  MetricFamily curriculum_phase = Family("zephon_curriculum_phase", "gauge",
                                         "The curriculum phase (0-based schedule entry) at "
                                         "the furthest chunk the instance's lanes reached.");
  MetricFamily curriculum_weight = Family("zephon_curriculum_weight", "gauge",
                                          "The dataset's curriculum weight at that chunk.");
  for (const proto::InstanceStatus& s : status.instances()) {
    const Labels labels = InstanceLabels(s);
    if (s.has_curriculum()) {
      curriculum_phase.Add(labels, s.curriculum().phase());
      for (const proto::DatasetWeight& w : s.curriculum().weights()) {
        Labels dataset = labels;
        dataset.emplace_back("dataset", w.dataset());
        curriculum_weight.Add(dataset, w.weight());
      }
    }
    for (const proto::LaneMixtureStatus& m : s.mixture()) {
      for (const proto::DatasetMixtureStatus& d : m.datasets()) {
        Labels lane = labels;
        lane.emplace_back("lane", std::to_string(m.lane()));
        lane.emplace_back("dataset", d.dataset());
        mix_samples.Add(lane, static_cast<double>(d.samples()));
        mix_tokens.Add(lane, static_cast<double>(d.tokens()));
        mix_dropped.Add(lane, static_cast<double>(d.dropped_samples()));
        mix_target.Add(lane, d.target_share());
        mix_achieved.Add(lane, d.achieved_share());
      }
    }
    for (const proto::LaneLossMaskStatus& m : s.loss_mask()) {
      Labels lane = labels;
      lane.emplace_back("lane", std::to_string(m.lane()));
      mask_tokens.Add(lane, static_cast<double>(m.tokens()));
      mask_masked.Add(lane, static_cast<double>(m.masked_tokens()));
      if (m.tokens() > 0) {
        mask_ratio.Add(lane, static_cast<double>(m.masked_tokens()) /
                                 static_cast<double>(m.tokens()));
      }
    }
    for (const proto::LanePackingStatus& p : s.packing()) {
      Labels lane = labels;
      lane.emplace_back("lane", std::to_string(p.lane()));
      const uint64_t cells = p.tokens() + p.padding_cells();
      pack_tokens.Add(lane, static_cast<double>(p.tokens()));
      pack_padding.Add(lane, static_cast<double>(p.padding_cells()));
      if (cells > 0) {
        pack_fill.Add(lane, static_cast<double>(p.tokens()) / static_cast<double>(cells));
      }
      pack_dropped_tokens.Add(lane, static_cast<double>(p.dropped_tokens()));
      pack_dropped_samples.Add(lane, static_cast<double>(p.dropped_samples()));
      pack_split_samples.Add(lane, static_cast<double>(p.split_samples()));
    }
    produced.Add(labels, static_cast<double>(s.produced()));
    released.Add(labels, static_cast<double>(s.released()));
    delivered_alias.Add(labels, static_cast<double>(s.released()));
    occupancy.Add(labels, static_cast<double>(s.ring_occupancy()));
    slots.Add(labels, s.ring_slots());
    bytes.Add(labels, static_cast<double>(s.ring_bytes()));
    readers.Add(labels, s.readers_attached());
    in_flight.Add(labels, s.materialize_in_flight());
    buffered.Add(labels, s.materialize_buffered());
    for (const proto::TextDatasetStatus& t : s.text_datasets()) {
      Labels dataset = labels;
      dataset.emplace_back("dataset", t.dataset());
      text_records.Add(dataset, static_cast<double>(t.records()));
      text_tokens.Add(dataset, static_cast<double>(t.tokens()));
      text_invalid.Add(dataset, static_cast<double>(t.invalid_utf8_records()));
      text_skipped.Add(dataset, static_cast<double>(t.skipped_missing()));
      text_null.Add(dataset, static_cast<double>(t.null_records()));
    }
    for (const proto::ReaderStatus& r : s.readers()) {
      if (r.state() != "attached") continue;
      Labels reader = labels;
      reader.emplace_back("rank", std::to_string(r.global_rank()));
      lag.Add(reader, static_cast<double>(r.lag()));
      waiting.Add(std::move(reader), r.waiting() ? 1 : 0);
    }
  }
  std::vector<MetricFamily> out = {produced,     released,    delivered_alias, occupancy,
                                   slots,        bytes,       readers,         lag,
                                   waiting,
                                   in_flight,    buffered,    text_records,    text_tokens,
                                   text_invalid, text_skipped, text_null,
                                   pack_tokens,  pack_padding, pack_fill, pack_dropped_tokens,
                                   pack_dropped_samples, pack_split_samples};
  // Only pipelines with ensure_mixture, loss masks or a curriculum report those: no
  // empty families.
  for (MetricFamily* f : {&mix_samples, &mix_tokens, &mix_dropped, &mix_target, &mix_achieved,
                          &mask_tokens, &mask_masked, &mask_ratio, &curriculum_phase,
                          &curriculum_weight}) {
    if (!f->samples.empty()) out.push_back(std::move(*f));
  }

  out.push_back(Family("zephon_instances", "gauge", "Pipeline instances running now.")
                    .Add({}, status.instances_size()));
  out.push_back(Family("zephon_worker_threads", "gauge", "Threads of the shared worker pool.")
                    .Add({}, status.worker_threads()));
  {
    using Result = DaemonCounters::RoundResult;
    MetricFamily rounds = Family("zephon_checkpoint_rounds_total", "counter",
                                 "Local checkpoint rounds of this daemon, by outcome (timeout: "
                                 "a local rank or the leader did not answer by the deadline).");
    for (const auto& [result, count] :
         {std::pair{Result::kOk, counters.rounds_ok()},
          std::pair{Result::kError, counters.rounds_error()},
          std::pair{Result::kTimeout, counters.rounds_timeout()}}) {
      rounds.Add({{"result", RoundResultName(result)}}, static_cast<double>(count));
    }
    out.push_back(std::move(rounds));
  }
  MetricFamily round_seconds = Family("zephon_checkpoint_round_seconds", "histogram",
                                      "Time from the local set being complete to the "
                                      "leader's answer.");
  counters.round_seconds().AppendTo({}, &round_seconds);
  out.push_back(round_seconds);
  out.push_back(Family("zephon_attach_total", "counter", "Attach requests, by result.")
                    .Add({{"result", "ok"}}, static_cast<double>(counters.attach_ok()))
                    .Add({{"result", "refused"}}, static_cast<double>(counters.attach_refused())));
  MetricFamily errors = Family("zephon_errors_total", "counter", "Errors, by kind.");
  for (int k = 0; k < static_cast<int>(ErrorKind::kCount); ++k) {
    const auto kind = static_cast<ErrorKind>(k);
    errors.Add({{"kind", ErrorKindName(kind)}}, static_cast<double>(counters.errors(kind)));
  }
  out.push_back(errors);
  auto counter = [&out](const char* name, const char* help, uint64_t v) {
    out.push_back(Family(name, "counter", help).Add({}, static_cast<double>(v)));
  };
  auto gauge = [&out](const char* name, const char* help, uint64_t v) {
    out.push_back(Family(name, "gauge", help).Add({}, static_cast<double>(v)));
  };
  if (status.has_shard_cache()) {
    const proto::ShardCacheStatus& c = status.shard_cache();
    counter("zephon_shard_cache_hits_total",
            "Block lookups of s3:// datasets served by the node's shard cache.", c.hits());
    counter("zephon_shard_cache_misses_total",
            "Block lookups of s3:// datasets that started a download.", c.misses());
    counter("zephon_shard_cache_waits_total",
            "Block lookups that joined another reader's download (single flight).",
            c.waits());
    counter("zephon_shard_cache_downloaded_bytes_total",
            "Bytes downloaded from object stores into the shard cache.",
            c.bytes_downloaded());
    counter("zephon_shard_cache_evictions_total",
            "Shard cache entries evicted to stay within the byte limit.", c.evictions());
    counter("zephon_shard_cache_errors_total", "Failed shard cache downloads.", c.errors());
    gauge("zephon_shard_cache_resident_bytes",
          "Bytes held by the shard cache (entry files, or memory when not on disk).",
          c.resident_bytes());
    gauge("zephon_shard_cache_pinned_bytes",
          "Shard cache bytes being read or downloaded (never evicted).", c.pinned_bytes());
    gauge("zephon_shard_cache_limit_bytes", "Byte limit of the shard cache.",
          c.limit_bytes());
  }
  if (status.s3_requests_size() > 0) {
    MetricFamily requests = Family("zephon_s3_requests_total", "counter",
                                   "S3 calls (datasets, aggregate_dirs, tokenizers), however "
                                   "many attempts each took, by operation.");
    MetricFamily retries = Family("zephon_s3_retries_total", "counter",
                                  "S3 attempts after a call's first (a retried failure).");
    MetricFamily s3_errors = Family("zephon_s3_errors_total", "counter",
                                    "S3 calls that failed: a transport failure or an HTTP "
                                    "status >= 400 other than 404, after the last attempt.");
    for (const proto::S3RequestStatus& r : status.s3_requests()) {
      const Labels op = {{"op", r.op()}};
      requests.Add(op, static_cast<double>(r.requests()));
      retries.Add(op, static_cast<double>(r.retries()));
      s3_errors.Add(op, static_cast<double>(r.errors()));
    }
    out.push_back(std::move(requests));
    out.push_back(std::move(retries));
    out.push_back(std::move(s3_errors));
  }
  if (status.has_conversions()) {
    const proto::ConversionStatus& c = status.conversions();
    counter("zephon_tokenize_bytes_total",
            "Text bytes the node's conversions tokenized into the token cache (its rate is "
            "the tokenizer throughput; it grows during a first attach of a text corpus).",
            c.tokenized_bytes());
    counter("zephon_tokenize_files_total", "Text shard conversions finished.",
            c.files_done());
    gauge("zephon_tokenize_active", "Text shard conversions running now.", c.active());
  }
  if (status.has_token_cache()) {
    const proto::TokenCacheStatus& t = status.token_cache();
    counter("zephon_token_cache_hits_total",
            "JSONL shard opens that found their converted tokens in the token cache.",
            t.hits());
    counter("zephon_token_cache_misses_total",
            "JSONL shard opens that converted the shard into the token cache.", t.misses());
    counter("zephon_token_cache_built_bytes_total",
            "Bytes of token cache entries converted by this daemon.", t.bytes_built());
    counter("zephon_token_cache_evictions_total",
            "Token cache entries evicted to stay within --token-cache-bytes.", t.evictions());
    counter("zephon_token_cache_evicted_bytes_total", "Bytes of evicted token cache entries.",
            t.evicted_bytes());
    gauge("zephon_token_cache_entries", "Converted shards held by the token cache.",
          t.entries());
    gauge("zephon_token_cache_bytes", "Bytes of the token cache's entry files.", t.bytes());
    gauge("zephon_token_cache_pinned_bytes",
          "Token cache bytes of datasets open now (never evicted).", t.pinned_bytes());
    gauge("zephon_token_cache_budget_bytes",
          "Byte budget of the token cache (--token-cache-bytes; 0 = none).", t.budget_bytes());
    gauge("zephon_token_cache_over_budget",
          "1 while entries in use alone exceed the token cache budget.",
          t.over_budget() ? 1 : 0);
  }
  out.push_back(Family("zephon_process_cpu_seconds_total", "counter",
                       "CPU seconds used by zephond (all threads).")
                    .Add({}, process.cpu_seconds));
  out.push_back(Family("zephon_resident_memory_bytes", "gauge",
                       "Resident set of zephond (includes touched ring pages).")
                    .Add({}, static_cast<double>(process.resident_bytes)));
  out.push_back(Family("zephon_shm_free_bytes", "gauge", "Free bytes of /dev/shm.")
                    .Add({}, static_cast<double>(process.shm_free_bytes)));
  out.push_back(Family("zephon_shm_size_bytes", "gauge", "Size of /dev/shm.")
                    .Add({}, static_cast<double>(process.shm_size_bytes)));
  out.push_back(Family("zephon_start_time_seconds", "gauge",
                       "When zephond started (Unix seconds): it changes when it restarts.")
                    .Add({}, status.start_time_unix_s()));
  return out;
}

}  // namespace zephon::metrics
