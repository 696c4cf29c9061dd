// MegatronShard: one Megatron indexed dataset shard (`prefix.bin` + `prefix.idx`).
//
// .idx layout (little-endian), validated completely at Open:
//   offset 0   9 bytes  magic "MMIDIDX\0\0"
//   offset 9   u64      version, must be 1
//   offset 17  u8       dtype code: 1 uint8, 2 int8, 3 int16, 4 int32, 5 int64,
//                       8 uint16 (6 float64 / 7 float32 are rejected: not token ids)
//   offset 18  u64      N, number of sequences
//   offset 26  u64      M, number of document-index entries
//   offset 34  i32[N]   sizes (tokens per sequence)
//   then       i64[N]   pointers (byte offset of each sequence in .bin)
//   then       i64[M]   doc_idx (read past, not used: one sample = one sequence)
// .bin holds the raw tokens. Every sequence must lie inside .bin.
// Storage: the header, sizes and pointers of the .idx (34 + 12*N bytes) are read into
// memory once at Open; the .bin is read per sample: pread for local files (a .bin
// truncated while in use is a DATA_LOSS error naming it and the offset, not a crash),
// ranged reads of the shard cache for remote ones.
// Thread-safe after Open (immutable).
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_MEGATRON_READER_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_MEGATRON_READER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/pipeline/formats/shard_file.h"
#include "daemon/pipeline/formats/shard_reader.h"
#include "daemon/pipeline/formats/tokens.h"

namespace zephon::pipeline {

inline constexpr char kMegatronMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
inline constexpr size_t kMegatronHeaderBytes = 34;

class MegatronShard final : public ShardReader {
 public:
  // Opens the local files `prefix`.bin and `prefix`.idx. Errors (DATA_LOSS for
  // malformed files, NOT_FOUND for missing ones) name the file and the offending offset
  // or field.
  static absl::StatusOr<std::unique_ptr<MegatronShard>> Open(const std::string& prefix);
  // The same over already-open files (an object store's): the needed part of `idx` is
  // read once here, `bin` is read on demand. Errors as above, plus the storage's for
  // reading `idx`.
  static absl::StatusOr<std::unique_ptr<MegatronShard>> Open(std::unique_ptr<ShardFile> idx,
                                                             std::unique_ptr<ShardFile> bin);

  std::string FileName() const override;
  uint64_t ByteSize() const override;
  uint64_t NumSamples() const override { return num_sequences_; }
  uint64_t SampleLength(uint64_t index) const override;
  absl::Status CopyTokens(uint64_t index, uint64_t offset, uint64_t count,
                          int32_t* out) const override;

 private:
  MegatronShard(uint64_t idx_bytes, std::string index,
                std::unique_ptr<ShardFile> bin, TokenType type, uint64_t num_sequences);
  int64_t Pointer(uint64_t index) const;

  const uint64_t idx_bytes_;  // size of the .idx file at Open
  const std::string index_;   // .idx bytes [0, 34 + 12*N): header, sizes, pointers
  const std::unique_ptr<ShardFile> bin_;
  const TokenType type_;
  const uint64_t num_sequences_;
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_MEGATRON_READER_H_
