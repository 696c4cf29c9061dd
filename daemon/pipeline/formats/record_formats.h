// The record-format table: per record format (Parquet, MDS; record_source.h), its name,
// which file names are its shards, how a dataset path resolves to shards, the opener of
// a shard's RecordSource and the checksum that keys its token cache and enters the
// dataset fingerprint. Dataset::Open (dataset.h) and format auto-detection read it, so
// adding a format is one entry here plus its decoder room (parquet/, mds/); nothing in
// dataset.cc names a record format.
//
// A dataset of a record format opens one RecordShard (record_shard.h) per shard ref, in
// the order `resolve` returns them, converted once into the node's token cache.
// JSONL is not in the table: it has its own line reader and its own (older) cache keys
// (jsonl_reader.h), which stay as they are.
//
// Thread-safe: the registry is mutex-guarded; entries are immutable once registered.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_RECORD_FORMATS_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_RECORD_FORMATS_H_

#include <any>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/pipeline/formats/dataset_files.h"
#include "daemon/pipeline/formats/record_source.h"
#include "daemon/pipeline/formats/shard_file.h"

namespace zephon::pipeline {

// One shard of a record dataset: the file, and what the format's resolver learnt about
// it (an MDS index entry, std::any_cast by that format's opener and checksum; empty for
// Parquet), handed to the opener and the checksum.
struct RecordShardRef {
  std::string path;
  std::any detail;
};

struct RecordFormat {
  // The dataset spec's `format` ("parquet"); also part of every cache key.
  std::string name;
  // Whether a file name (a path's last component) is one of this format's shards:
  // auto-detection and the default resolver's directory filter use it.
  std::function<bool(std::string_view file_name)> is_shard_name;
  // The dataset path (already resolved by `files`: a directory listing, glob matches or
  // the single path) -> its shards, in order. Null: the default (DefaultRecordShards).
  std::function<absl::StatusOr<std::vector<RecordShardRef>>(
      const std::string& path, const DatasetFiles::Resolved& resolved, DatasetFiles& files)>
      resolve;
  // Opens a shard's records (record_source.h), reading `file` only as needed.
  std::function<absl::StatusOr<std::unique_ptr<RecordSource>>(
      std::unique_ptr<ShardFile> file, const RecordShardRef& ref, const RecordField& field)>
      open;
  // The format's checksum of a shard (a footer's, an index entry's): bytes that change
  // when the shard's content does. Read at every open (it keys the cache), so it must
  // be cheap: a footer, never the data.
  std::function<absl::StatusOr<std::string>(const ShardFile& file, const RecordShardRef& ref)>
      checksum;
};

// The default resolver: a directory's files that are shard names (in name order), every
// glob match (in path order), or the single path. INVALID_ARGUMENT naming the path and
// the format when a directory holds no shard of it.
absl::StatusOr<std::vector<RecordShardRef>> DefaultRecordShards(
    const RecordFormat& format, const std::string& path, const DatasetFiles::Resolved& resolved);

class RecordFormats {
 public:
  // The process-wide table: the built-in formats, plus what Register adds (tests).
  static RecordFormats& Global();

  // Adds `format`. INVALID_ARGUMENT without a name, is_shard_name, open or checksum, or
  // for a name taken by a built-in format ("megatron", "flat", "jsonl"); ALREADY_EXISTS
  // for a name already registered.
  absl::Status Register(RecordFormat format) ABSL_LOCKS_EXCLUDED(mu_);
  // The format named `name`, or null.
  std::shared_ptr<const RecordFormat> Find(std::string_view name) const ABSL_LOCKS_EXCLUDED(mu_);
  // The first format (in name order) one of whose shard names is in `file_names`, or
  // null: auto-detection.
  std::shared_ptr<const RecordFormat> Detect(const std::vector<std::string>& file_names) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The registered names, sorted (for "unknown format" messages).
  std::vector<std::string> Names() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, std::shared_ptr<const RecordFormat>, std::less<>> formats_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_RECORD_FORMATS_H_
