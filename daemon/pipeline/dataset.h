// Dataset: a named, ordered list of shards with random access to sample tokens.
//
// Opening (Dataset::Open, from a DatasetSpec):
//   format "megatron": `path` is a directory (every X.bin + X.idx pair in it is a
//     shard; an .idx without its .bin or vice versa is an error naming it) or a shard
//     prefix (path.bin / path.idx; a trailing ".bin"/".idx" on `path` is stripped).
//   format "flat": `path` is a file, or a directory whose regular files (names not
//     starting with '.') are the shards. dtype "uint16" (default) or "uint32";
//     samples of flat_sample_tokens tokens (default 2048).
//   format "": auto-detect: megatron if `path` is a directory holding any .idx file
//     or `path`.idx exists or `path` ends in .idx/.bin with a sibling .idx; else flat.
//   Shards are sorted by file name (byte order). No shards, or zero samples in total,
//   is INVALID_ARGUMENT. Globs are not supported in v1.
// Fingerprint(): HashBytes over name, resolved format and, per shard in order, file
// name + sample count + byte size (see dataset.cc for the exact byte layout). It is
// part of the spec hash, so renaming/resizing a shard changes the hash.
// Thread-safe after construction (immutable).
#ifndef ZEPHON_DAEMON_PIPELINE_DATASET_H_
#define ZEPHON_DAEMON_PIPELINE_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/pipeline/shard_reader.h"
#include "proto/spec.pb.h"

namespace zephon::pipeline {

class Dataset {
 public:
  static absl::StatusOr<std::unique_ptr<Dataset>> Open(const proto::DatasetSpec& spec);
  // Builds a dataset over already-open shards (tests, future backends).
  // INVALID_ARGUMENT if there are no shards or no samples.
  static absl::StatusOr<std::unique_ptr<Dataset>> FromShards(
      std::string name, std::string format, std::vector<std::unique_ptr<ShardReader>> shards);

  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const std::string& name() const { return name_; }
  // "megatron" or "flat" (the detected format when the spec left it empty).
  const std::string& format() const { return format_; }
  uint32_t NumShards() const { return static_cast<uint32_t>(shards_.size()); }
  const ShardReader& shard(uint32_t s) const { return *shards_[s]; }
  uint64_t ShardSamples(uint32_t s) const { return shards_[s]->NumSamples(); }
  uint64_t NumSamples() const { return num_samples_; }
  uint64_t SampleLength(uint32_t shard, uint64_t index) const {
    return shards_[shard]->SampleLength(index);
  }
  // Appends tokens [offset, offset+count) of (shard, index) as int32.
  void AppendTokens(uint32_t shard, uint64_t index, uint64_t offset, uint64_t count,
                    std::vector<int32_t>* out) const {
    shards_[shard]->AppendTokens(index, offset, count, out);
  }
  uint64_t Fingerprint() const;

 private:
  Dataset(std::string name, std::string format,
          std::vector<std::unique_ptr<ShardReader>> shards);

  const std::string name_;
  const std::string format_;
  const std::vector<std::unique_ptr<ShardReader>> shards_;
  uint64_t num_samples_ = 0;
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_DATASET_H_
