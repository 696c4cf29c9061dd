// Dataset: a named, ordered list of shards with random access to sample tokens.
//
// Opening (Dataset::Open, from a DatasetSpec). `path` is a directory, a single
// shard, or a glob (path_glob.h: contains '*', '?' or '['; matches are regular files
// sorted by full path; no match is NOT_FOUND naming the pattern), or the same in an
// object store, "s3://bucket/key" (remote_files.h says how keys resolve; bytes are read
// through OpenOptions::shard_cache). `path` is classified by storage::ClassifyLocation,
// like aggregate_dir: "file:///abs" opens as "/abs"; any other scheme is INVALID_ARGUMENT.
//   format "megatron": a directory (every X.bin + X.idx pair in it is a shard; an .idx
//     without its .bin or vice versa is an error naming it), a shard prefix (path.bin /
//     path.idx; a trailing ".bin"/".idx" on `path` is stripped), or a glob: each match
//     ending in .bin or .idx names the shard prefix without that suffix (so
//     "shard-*", "shard-*.bin" and "shard-*.idx" all select the same shards; other
//     matches are ignored); both files of every prefix must exist.
//   format "flat": a file, a directory whose regular files (names not starting with
//     '.') are the shards, or a glob whose every match is a shard. dtype "uint16"
//     (default) or "uint32"; samples of flat_sample_tokens tokens (default 2048).
//   format "jsonl": a file, a directory whose .jsonl / .jsonl.gz / .jsonl.zst files
//     are the shards (others ignored), or a glob whose every match is a shard
//     (compression by suffix: .gz, .zst, else plain). Tokens from field jsonl_field
//     (default "input_ids"); shards are converted once into a token cache under
//     OpenOptions::cache_dir (see jsonl_reader.h).
//   a record format (record_formats.h: "parquet", "mds" as their rooms register them):
//     the format's resolver names the shards (Parquet: the *.parquet files of a
//     directory in name order, or a glob's matches; MDS: the entries of a directory's
//     index.json), each converted once into the token cache (record_shard.h). The
//     column read is spec.field (else jsonl_field, else "input_ids"); null records are
//     skipped and counted, or fail the open with on_null ERROR. on_null on another
//     format is INVALID_ARGUMENT.
//   Text datasets (Open with a TextTokenization): the format must be "jsonl" or a record
//     format (given or detected); each record's text field (TextTokenization::field) is
//     tokenized into the token cache (jsonl_reader.h, record_shard.h, text_convert.h). A
//     megatron or flat dataset is INVALID_ARGUMENT naming the path: it is already tokens.
//   format "": auto-detect. Directory or glob: megatron if any file/match ends in .idx
//     or ends in .bin with a sibling .idx, else jsonl if any is a JSONL name, else the
//     first record format (by name) with a shard name among them, else flat.
//     Single path: megatron if `path`.idx exists or `path` ends in .idx/.bin with a
//     sibling .idx; jsonl if `path` is a JSONL name; a record format whose shard name it
//     is; else flat. A .bin without its .idx
//     (the first one met, in either case) is NOT_FOUND naming the missing .idx and the
//     fix (format "flat" for raw token files such as nanoGPT's train.bin): read as flat
//     tokens it would silently cut a Megatron corpus at wrong boundaries.
//   Directory shards are sorted by file name, glob shards by full path (byte order).
//   No shards, or zero samples in total, is INVALID_ARGUMENT.
// Fingerprint(): HashBytes over name, resolved format and, per shard in order, file
// name + sample count + byte size (see dataset.cc for the exact byte layout). It is
// part of the spec hash, so renaming/resizing a shard changes the hash. For JSONL the
// size is the source file's (compressed) size. A text dataset appends "\0text\0" and
// TextOptionBytes (field, tokenizer fingerprint, options), so the same files read as
// text and as token arrays never share a fingerprint. A record-format dataset adds each
// shard's format checksum (footer / index entry), which covers the format's version. Where the files live is not part of it:
// the same files on local disk and in S3 have the same fingerprint.
// Thread-safe after construction (immutable apart from the mutex-guarded content
// checksum cache).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_DATASET_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_DATASET_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/pipeline/formats/line_reader.h"
#include "daemon/pipeline/formats/shard_reader.h"
#include "daemon/pipeline/formats/text_convert.h"
#include "daemon/pipeline/formats/text_tokenization.h"
#include "daemon/pipeline/formats/token_cache.h"
#include "daemon/storage/object_store.h"
#include "daemon/storage/s3_store.h"
#include "daemon/storage/shard_cache.h"
#include "proto/spec.pb.h"

namespace zephon::pipeline {

// How to open datasets (execution environment, never part of the data identity).
struct OpenOptions {
  // Directory of the JSONL token caches; empty = DefaultCacheDir() (common/cache_dir.h),
  // created 0700 on first use.
  std::string cache_dir;
  // The node's token cache budget (zephond's --token-cache-bytes): when set, JSONL token
  // caches live in its directory (cache_dir is not used) and each open shard pins its
  // entry. Null: unmanaged, no budget (tests, tools).
  std::shared_ptr<TokenCache> token_cache;
  // Longest JSONL line (decompressed bytes) converted into the token cache; a longer
  // one fails the dataset naming the file and line (zephond --max-jsonl-line-bytes).
  uint64_t max_jsonl_line_bytes = kDefaultMaxLineBytes;
  // The node's cache of object-store bytes, shared by every dataset of every instance
  // (zephond's --shard-cache-bytes). Null: each s3:// dataset gets a private
  // memory-only cache.
  std::shared_ptr<storage::ShardCache> shard_cache;
  // Where s3:// datasets connect (zephond's --s3-* flags); fields left empty come from
  // the AWS_* environment and shared files.
  storage::S3Options s3;
  // Opens the store of "s3://bucket" (tests inject fakes). Null: S3Store::OpenUrl with
  // `s3`.
  std::function<absl::StatusOr<std::shared_ptr<storage::ObjectStore>>(
      const std::string& bucket_url)>
      open_store;
  // Where text datasets tokenize (the node's worker pool; null = the opening thread).
  TextConvertOptions text_convert;
  // How many shards of one JSONL or record-format dataset open (convert) at once: the
  // opening thread and shards_at_once - 1 more. zephond sets 2 for text datasets on its
  // worker pool, so one shard's head and tail (its first block being read, its cache's
  // fsync) overlap with another's tokenization. Shards start in order, at most this
  // many source files are open at a time, and the shards, their order and the error
  // reported (the first failing shard's) are those of a sequential open
  // (ordered_jobs.h).
  int shards_at_once = 1;
};

class Dataset {
 public:
  // Errors name the dataset path (and file/line where applicable): INVALID_ARGUMENT
  // for an unsupported location, a bad format/dtype or an empty dataset, NOT_FOUND for missing files or an
  // unmatched glob, DATA_LOSS for malformed shard contents.
  // With `text` (which must outlive the call) the dataset is a text dataset (see the
  // file comment); spec.jsonl_field is then unused.
  static absl::StatusOr<std::unique_ptr<Dataset>> Open(const proto::DatasetSpec& spec,
                                                       const OpenOptions& options = {},
                                                       const TextTokenization* text = nullptr);
  // Builds a dataset over already-open shards (tests).
  // INVALID_ARGUMENT if there are no shards or no samples.
  static absl::StatusOr<std::unique_ptr<Dataset>> FromShards(
      std::string name, std::string format, std::vector<std::unique_ptr<ShardReader>> shards);

  Dataset(const Dataset&) = delete;
  Dataset& operator=(const Dataset&) = delete;

  const std::string& name() const { return name_; }
  // "megatron", "flat" or "jsonl" (the detected format when the spec left it empty).
  const std::string& format() const { return format_; }
  uint32_t NumShards() const { return static_cast<uint32_t>(shards_.size()); }
  const ShardReader& shard(uint32_t s) const { return *shards_[s]; }
  uint64_t ShardSamples(uint32_t s) const { return shards_[s]->NumSamples(); }
  uint64_t NumSamples() const { return num_samples_; }
  uint64_t SampleLength(uint32_t shard, uint64_t index) const {
    return shards_[shard]->SampleLength(index);
  }
  // Writes tokens [offset, offset+count) of (shard, index) as int32 to out[0..count).
  // Fails only for shards in an object store (ShardReader::CopyTokens).
  absl::Status CopyTokens(uint32_t shard, uint64_t index, uint64_t offset, uint64_t count,
                          int32_t* out) const {
    return shards_[shard]->CopyTokens(index, offset, count, out);
  }
  // Appends tokens [offset, offset+count) of (shard, index) as int32.
  absl::Status AppendTokens(uint32_t shard, uint64_t index, uint64_t offset, uint64_t count,
                            std::vector<int32_t>* out) const {
    return shards_[shard]->AppendTokens(index, offset, count, out);
  }
  // Some shard carries a loss mask (DatasetSpec.loss_mask_field, or tokenize's loss_on).
  bool HasLossMask() const { return has_loss_mask_; }
  // Writes the loss mask of tokens [offset, offset+count) of (shard, index), one 0/1
  // byte per token (all ones without a mask). Errors as CopyTokens.
  absl::Status CopyLossMask(uint32_t shard, uint64_t index, uint64_t offset, uint64_t count,
                            uint8_t* out) const {
    return shards_[shard]->CopyLossMask(index, offset, count, out);
  }
  // Every shard keeps its samples' source records (tokenize keep_payload).
  bool HasPayload() const {
    for (const auto& s : shards_) {
      if (!s->HasPayload()) return false;
    }
    return true;
  }
  // Bytes of (shard, index)'s payload; 0 without.
  uint64_t PayloadBytes(uint32_t shard, uint64_t index) const {
    return shards_[shard]->PayloadBytes(index);
  }
  // (shard, index)'s payload, a JSON object, into *out (ShardReader::CopyPayload).
  absl::Status CopyPayload(uint32_t shard, uint64_t index, std::string* out) const {
    return shards_[shard]->CopyPayload(index, out);
  }
  uint64_t Fingerprint() const;
  // Text and record-format datasets: shard s's conversion counts (and whether this
  // Open converted it); null for other datasets. REQUIRES: s < NumShards().
  const TextShardStats* ShardTextStats(uint32_t s) const {
    return text_stats_.empty() ? nullptr : &text_stats_[s];
  }
  // Opened with a TextTokenization.
  bool is_text() const { return !text_options_.empty(); }
  // Has conversion counts: a text dataset or a record-format one (record_formats.h).
  bool has_conversion_stats() const { return !text_stats_.empty(); }
  // The sum over shards (all zero for datasets without conversion counts), except
  // tokenize_seconds: the wall seconds the open spent opening the shards when it
  // converted any (shards convert at once: OpenOptions::shards_at_once).
  TextShardStats TextStats() const;
  // A location-independent checksum of shard `s`'s content, for restore checks
  // (daemon/checkpoint/dataset_content.h): its sample-length table (what a Megatron
  // .idx or a JSONL line index holds) and the first kContentSampleTokens tokens of its
  // first, middle and last sample. O(samples of the shard) on the first call, then
  // cached. Errors: CopyTokens's (object stores), naming the file.
  // REQUIRES: s < NumShards().
  absl::StatusOr<uint64_t> ShardContentChecksum(uint32_t s) const;
  static constexpr uint64_t kContentSampleTokens = 4096;

 private:
  Dataset(std::string name, std::string format,
          std::vector<std::unique_ptr<ShardReader>> shards);

  const std::string name_;
  const std::string format_;
  const std::vector<std::unique_ptr<ShardReader>> shards_;
  uint64_t num_samples_ = 0;
  bool has_loss_mask_ = false;
  // Set by Open, then immutable. Text datasets: TextOptionBytes. Text and record
  // datasets: per-shard stats. Record datasets: per-shard format checksums.
  std::string text_options_;
  std::vector<TextShardStats> text_stats_;
  double shards_open_seconds_ = 0;  // wall seconds opening the shards took
  std::vector<std::string> record_checksums_;
  // ShardContentChecksum's cache, one entry per shard (filled on demand).
  mutable absl::Mutex content_mu_;
  mutable std::vector<std::optional<uint64_t>> content_ ABSL_GUARDED_BY(content_mu_);
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_DATASET_H_
