// JsonlShard: one JSONL shard (.jsonl, .jsonl.gz, .jsonl.zst), served from a binary
// token cache because compressed text has no random access.
//
// Samples: every non-blank line (blank = only spaces, tabs and CRs; skipped, so they
// do not count) is one JSON object and one sample; its tokens are the integer array
// in field `field` (see json_scan.h for the accepted JSON). Sample i is the i-th
// non-blank line. A UTF-8 byte order mark at the start of the file is ignored.
// Token cache: on Open, the shard is looked up in `cache_dir` under
//   key = 16 hex digits of HashBytes("zephon-jsonl-cache-v1\0" absolute path "\0"
//         u64 LE size, u64 LE mtime_ns, field)
// as <key>.tok (int32 LE tokens of all samples back to back) and <key>.off (u64 LE
// offsets, N + 1 of them, in tokens: sample i is tokens [off[i], off[i+1])). A missing
// or inconsistent cache is (re)built: the source is converted into temporary files in
// cache_dir which are renamed into place (.tok first, then .off, which commits), so
// concurrent openers never see a partial cache and may race harmlessly (the content
// is a pure function of the key). Then .off is read into memory and .tok is read with
// pread per sample (a cache file shrunk under the daemon is DATA_LOSS, not a crash).
// Editing the source changes its size or mtime and so its key; stale caches are left
// behind.
// The source is stat'ed before and after conversion; a change in between is an error.
// Object-store sources (s3://, opened as a ShardFile that reads through the node's shard
// cache) are keyed the same way with "remote\0" URL "\0" u64 LE size, version (ETag),
// "\0" in place of the path, size and mtime, so a replaced object is converted again;
// the shard cache fails the conversion if the object changes while it is read.
// cache_dir is created (mode 0700, with parents) when missing.
// Conversion reads lines of at most `max_line_bytes` (line_reader.h; zephond
// --max-jsonl-line-bytes): a longer line fails the conversion. An existing cache is used
// whatever the limit it was built under (the limit guards conversion memory only).
// Errors name the source file, the 1-based line number and the decompressed byte
// offset of the problem: DATA_LOSS for malformed lines, missing fields, bad elements
// and truncated / corrupt compressed streams; RESOURCE_EXHAUSTED for a line over
// max_line_bytes; NOT_FOUND for a missing source;
// INTERNAL / PERMISSION_DENIED for cache I/O failures (naming the cache file).
// Thread-safe after Open (immutable).
#ifndef ZEPHON_DAEMON_PIPELINE_JSONL_READER_H_
#define ZEPHON_DAEMON_PIPELINE_JSONL_READER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "daemon/pipeline/line_reader.h"
#include "daemon/pipeline/shard_file.h"
#include "daemon/pipeline/shard_reader.h"

namespace zephon::pipeline {

inline constexpr char kDefaultJsonlField[] = "input_ids";

// True for names ending in ".jsonl", ".jsonl.gz" or ".jsonl.zst".
bool IsJsonlFileName(std::string_view name);

class JsonlShard final : public ShardReader {
 public:
  // REQUIRES: `field` and `cache_dir` non-empty, max_line_bytes >= 1 (INVALID_ARGUMENT
  // otherwise).
  static absl::StatusOr<std::unique_ptr<JsonlShard>> Open(
      const std::string& path, const std::string& field, const std::string& cache_dir,
      uint64_t max_line_bytes = kDefaultMaxLineBytes);
  // The same for an object-store source: `source` is read front to back only when the
  // token cache for (source->path(), size, `version`, `field`) is missing. Errors also
  // include the storage's (naming the URL, bucket, key and HTTP status).
  static absl::StatusOr<std::unique_ptr<JsonlShard>> Open(
      std::unique_ptr<ShardFile> source, const std::string& version, const std::string& field,
      const std::string& cache_dir, uint64_t max_line_bytes = kDefaultMaxLineBytes);

  // The source file's base name and byte size (what the dataset fingerprint covers).
  std::string FileName() const override;
  uint64_t ByteSize() const override { return source_bytes_; }
  uint64_t NumSamples() const override { return num_samples_; }
  uint64_t SampleLength(uint64_t index) const override;
  absl::Status CopyTokens(uint64_t index, uint64_t offset, uint64_t count,
                          int32_t* out) const override;
  // "<cache_dir>/<key>": the cache files are this plus ".tok" / ".off".
  const std::string& cache_prefix() const { return cache_prefix_; }

 private:
  JsonlShard(std::string path, uint64_t source_bytes, std::string cache_prefix,
             std::unique_ptr<ShardFile> tok, std::unique_ptr<ShardFile> off);
  // Opens the cache at `prefix`, running `build` first when it is missing or broken.
  static absl::StatusOr<std::unique_ptr<JsonlShard>> OpenCached(
      const std::string& path, uint64_t source_bytes, const std::string& cache_dir,
      const std::string& prefix,
      const std::function<absl::Status()>& build);
  uint64_t Offset(uint64_t i) const;

  const std::string path_;
  const uint64_t source_bytes_;
  const std::string cache_prefix_;
  const std::unique_ptr<ShardFile> tok_;
  const std::unique_ptr<ShardFile> off_;
  const uint64_t num_samples_;
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_JSONL_READER_H_
