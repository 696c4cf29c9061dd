// FlatShard: one file of raw little-endian tokens (uint16 or uint32), cut into samples.
//
// Sample i covers tokens [i*S, min((i+1)*S, T)) where S = sample_tokens and T is the
// file's token count; the trailing partial piece is its own shorter sample. A file
// whose byte size is not a multiple of the dtype width is rejected. Local files are
// read per sample with pread (a file truncated while in use is a DATA_LOSS error naming
// it); remote ones through the shard cache.
// Thread-safe after Open (immutable).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_FLAT_READER_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_FLAT_READER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/shard_file.h"
#include "daemon/pipeline/formats/shard_reader.h"
#include "daemon/pipeline/formats/tokens.h"

namespace zephon::pipeline {

class FlatShard final : public ShardReader {
 public:
  // REQUIRES: sample_tokens >= 1 (INVALID_ARGUMENT otherwise).
  static absl::StatusOr<std::unique_ptr<FlatShard>> Open(const std::string& path,
                                                         TokenType type,
                                                         uint64_t sample_tokens);
  // The same over an already-open file (an object store's).
  static absl::StatusOr<std::unique_ptr<FlatShard>> Open(std::unique_ptr<ShardFile> file,
                                                         TokenType type,
                                                         uint64_t sample_tokens);

  std::string FileName() const override;
  uint64_t ByteSize() const override { return file_->size(); }
  uint64_t NumSamples() const override;
  uint64_t SampleLength(uint64_t index) const override;
  absl::Status CopyTokens(uint64_t index, uint64_t offset, uint64_t count,
                          int32_t* out) const override;

 private:
  FlatShard(std::unique_ptr<ShardFile> file, TokenType type, uint64_t sample_tokens);

  const std::unique_ptr<ShardFile> file_;
  const TokenType type_;
  const uint64_t sample_tokens_;
  const uint64_t num_tokens_;
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_FLAT_READER_H_
