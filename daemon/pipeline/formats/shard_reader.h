// ShardReader: random access to the samples of one shard, whatever its format.
//
// A sample is a sequence of int32 tokens. Implementations (MegatronShard, FlatShard,
// JsonlShard) validate their index data at Open, so the sample table (NumSamples,
// SampleLength) cannot fail; index/offset arguments out of range are caller bugs.
// Reading tokens can fail when the shard's bytes live in an object store (a download
// that fails, an object that changed since it was opened): CopyTokens returns the
// error, naming the file. For local files it always succeeds.
// Thread-safe (immutable after Open).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_SHARD_READER_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_SHARD_READER_H_

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace zephon::pipeline {

class ShardReader {
 public:
  virtual ~ShardReader() = default;
  // Base file name (e.g. "part-00.bin"): what the dataset fingerprint covers.
  virtual std::string FileName() const = 0;
  // Total bytes of the shard's files (fingerprint input).
  virtual uint64_t ByteSize() const = 0;
  virtual uint64_t NumSamples() const = 0;
  // Tokens in sample `index`. REQUIRES: index < NumSamples().
  virtual uint64_t SampleLength(uint64_t index) const = 0;
  // Writes tokens [offset, offset+count) of sample `index` to out[0..count).
  // REQUIRES: index < NumSamples(), offset + count <= SampleLength(index).
  // Errors: the storage's (see the file comment); out[] is then unspecified.
  virtual absl::Status CopyTokens(uint64_t index, uint64_t offset, uint64_t count,
                                  int32_t* out) const = 0;

  // Whether the shard carries a loss mask (loss_mask.h; only token-cache shards can).
  virtual bool HasLossMask() const { return false; }
  // Writes the loss mask of tokens [offset, offset+count) of sample `index` to
  // out[0..count), one 0/1 byte per token: all ones for a shard without a mask.
  // REQUIRES and errors as CopyTokens.
  virtual absl::Status CopyLossMask(uint64_t index, uint64_t offset, uint64_t count,
                                    uint8_t* out) const {
    (void)index;
    (void)offset;
    std::fill(out, out + count, uint8_t{1});
    return absl::OkStatus();
  }

  // Whether the shard keeps each sample's source record, a JSON object
  // (TextTokenization::keep_payload; only token-cache shards can).
  virtual bool HasPayload() const { return false; }
  // Bytes of sample `index`'s payload (0 without). REQUIRES as CopyPayload.
  virtual uint64_t PayloadBytes(uint64_t index) const {
    (void)index;
    return 0;
  }
  // Sample `index`'s payload, replacing *out. REQUIRES: index < NumSamples().
  // Errors: FAILED_PRECONDITION without payloads; those of CopyTokens otherwise.
  virtual absl::Status CopyPayload(uint64_t index, std::string* out) const {
    (void)index;
    out->clear();
    return absl::FailedPreconditionError(FileName() + " keeps no payloads");
  }

  // Convenience for tests and small callers: appends the same tokens to `out` (on
  // error `out` is left as it was).
  absl::Status AppendTokens(uint64_t index, uint64_t offset, uint64_t count,
                            std::vector<int32_t>* out) const {
    const size_t base = out->size();
    out->resize(base + count);
    absl::Status s = CopyTokens(index, offset, count, out->data() + base);
    if (!s.ok()) out->resize(base);
    return s;
  }
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_SHARD_READER_H_
