#include "daemon/pipeline/formats/megatron_reader.h"

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zephon::pipeline {
namespace {

template <typename T>
T Load(std::string_view bytes, uint64_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof(T));
  return v;
}

absl::StatusOr<TokenType> DtypeFromCode(uint8_t code, const std::string& path) {
  switch (code) {
    case 1: return TokenType::kUint8;
    case 2: return TokenType::kInt8;
    case 3: return TokenType::kInt16;
    case 4: return TokenType::kInt32;
    case 5: return TokenType::kInt64;
    case 8: return TokenType::kUint16;
    default:
      return absl::DataLossError(absl::StrCat(
          path, ": offset 17: dtype code ", code,
          " is not an integer token type (accepted: 1,2,3,4,5,8)"));
  }
}

}  // namespace

MegatronShard::MegatronShard(uint64_t idx_bytes, std::string index,
                             std::unique_ptr<ShardFile> bin, TokenType type,
                             uint64_t num_sequences)
    : idx_bytes_(idx_bytes),
      index_(std::move(index)),
      bin_(std::move(bin)),
      type_(type),
      num_sequences_(num_sequences) {}

absl::StatusOr<std::unique_ptr<MegatronShard>> MegatronShard::Open(const std::string& prefix) {
  ASSIGN_OR_RETURN(std::unique_ptr<ShardFile> idx, OpenLocalShardFile(prefix + ".idx"));
  ASSIGN_OR_RETURN(std::unique_ptr<ShardFile> bin, OpenLocalShardFile(prefix + ".bin"));
  return Open(std::move(idx), std::move(bin));
}

absl::StatusOr<std::unique_ptr<MegatronShard>> MegatronShard::Open(
    std::unique_ptr<ShardFile> idx, std::unique_ptr<ShardFile> bin) {
  const std::string& path = idx->path();
  const uint64_t idx_bytes = idx->size();
  if (idx_bytes < kMegatronHeaderBytes) {
    return absl::DataLossError(absl::StrCat(path, ": truncated header: ", idx_bytes,
                                            " bytes, need ", kMegatronHeaderBytes));
  }
  std::string index(kMegatronHeaderBytes, '\0');
  RETURN_IF_ERROR(idx->ReadAt(0, kMegatronHeaderBytes, index.data()));
  if (std::memcmp(index.data(), kMegatronMagic, sizeof(kMegatronMagic)) != 0) {
    return absl::DataLossError(absl::StrCat(path, ": offset 0: bad magic (not MMIDIDX)"));
  }
  const uint64_t version = Load<uint64_t>(index, 9);
  if (version != 1) {
    return absl::DataLossError(
        absl::StrCat(path, ": offset 9: unsupported version ", version, " (need 1)"));
  }
  ASSIGN_OR_RETURN(TokenType type, DtypeFromCode(Load<uint8_t>(index, 17), path));
  const uint64_t n = Load<uint64_t>(index, 18);
  const uint64_t m = Load<uint64_t>(index, 26);
  // Bound the counts by the file size before multiplying so nothing overflows.
  const uint64_t body = idx_bytes - kMegatronHeaderBytes;
  if (n > body / 12 || m > (body - 12 * n) / 8) {
    return absl::DataLossError(absl::StrCat(
        path, ": truncated: ", idx_bytes, " bytes cannot hold ", n, " sequences and ", m,
        " document entries (need ", kMegatronHeaderBytes, " + 12*N + 8*M)"));
  }
  // Only the sizes and pointers stay in memory (12 bytes a sequence); doc_idx is unused.
  // Copying them out once means a later rewrite of the .idx cannot reach the shard.
  index.resize(kMegatronHeaderBytes + 12 * n);
  RETURN_IF_ERROR(idx->ReadAt(kMegatronHeaderBytes, 12 * n, index.data() + kMegatronHeaderBytes));
  const std::string_view b(index);
  const uint64_t width = TokenWidth(type);
  const uint64_t bin_size = bin->size();
  const uint64_t ptr_base = kMegatronHeaderBytes + 4 * n;
  for (uint64_t i = 0; i < n; ++i) {
    const int32_t size = Load<int32_t>(b, kMegatronHeaderBytes + 4 * i);
    const int64_t ptr = Load<int64_t>(b, ptr_base + 8 * i);
    if (size < 0 || ptr < 0 || static_cast<uint64_t>(ptr) > bin_size ||
        static_cast<uint64_t>(size) * width > bin_size - static_cast<uint64_t>(ptr)) {
      return absl::DataLossError(absl::StrCat(
          path, ": sequence ", i, " (size at offset ", kMegatronHeaderBytes + 4 * i,
          ", pointer at offset ", ptr_base + 8 * i, "): ", size, " tokens at byte ", ptr,
          " lie outside ", bin->path(), " (", bin_size, " bytes)"));
    }
  }
  return std::unique_ptr<MegatronShard>(
      new MegatronShard(idx_bytes, std::move(index), std::move(bin), type, n));
}

std::string MegatronShard::FileName() const {
  return std::filesystem::path(bin_->path()).filename().string();
}

uint64_t MegatronShard::ByteSize() const { return idx_bytes_ + bin_->size(); }

uint64_t MegatronShard::SampleLength(uint64_t index) const {
  int32_t v;
  std::memcpy(&v, index_.data() + kMegatronHeaderBytes + 4 * index, sizeof(v));
  return static_cast<uint64_t>(v);
}

int64_t MegatronShard::Pointer(uint64_t index) const {
  int64_t v;
  std::memcpy(&v, index_.data() + kMegatronHeaderBytes + 4 * num_sequences_ + 8 * index,
              sizeof(v));
  return v;
}

absl::Status MegatronShard::CopyTokens(uint64_t index, uint64_t offset, uint64_t count,
                                       int32_t* out) const {
  const uint64_t start = static_cast<uint64_t>(Pointer(index)) + offset * TokenWidth(type_);
  return DecodeTokensAt(*bin_, start, type_, count, out);
}

}  // namespace zephon::pipeline
