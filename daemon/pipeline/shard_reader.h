// ShardReader: random access to the samples of one shard, whatever its format.
//
// A sample is a sequence of int32 tokens. Implementations (MegatronShard, FlatShard)
// validate their files at Open, so these accessors cannot fail; index/offset
// arguments out of range are caller bugs. Thread-safe (immutable after Open).
#ifndef ZEPHON_DAEMON_PIPELINE_SHARD_READER_H_
#define ZEPHON_DAEMON_PIPELINE_SHARD_READER_H_

#include <cstdint>
#include <string>
#include <vector>

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
  virtual void CopyTokens(uint64_t index, uint64_t offset, uint64_t count,
                          int32_t* out) const = 0;

  // Convenience for tests and small callers: appends the same tokens to `out`.
  void AppendTokens(uint64_t index, uint64_t offset, uint64_t count,
                    std::vector<int32_t>* out) const {
    const size_t base = out->size();
    out->resize(base + count);
    CopyTokens(index, offset, count, out->data() + base);
  }
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_SHARD_READER_H_
