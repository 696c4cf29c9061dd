#include "daemon/pipeline/formats/flat_reader.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace zephon::pipeline {

FlatShard::FlatShard(std::unique_ptr<ShardFile> file, TokenType type, uint64_t sample_tokens)
    : file_(std::move(file)),
      type_(type),
      sample_tokens_(sample_tokens),
      num_tokens_(file_->size() / TokenWidth(type)) {}

absl::StatusOr<std::unique_ptr<FlatShard>> FlatShard::Open(const std::string& path,
                                                           TokenType type,
                                                           uint64_t sample_tokens) {
  if (sample_tokens == 0) {
    return absl::InvalidArgumentError("flat_sample_tokens must be >= 1, got 0");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<ShardFile> file, OpenLocalShardFile(path));
  return Open(std::move(file), type, sample_tokens);
}

absl::StatusOr<std::unique_ptr<FlatShard>> FlatShard::Open(std::unique_ptr<ShardFile> file,
                                                           TokenType type,
                                                           uint64_t sample_tokens) {
  if (sample_tokens == 0) {
    return absl::InvalidArgumentError("flat_sample_tokens must be >= 1, got 0");
  }
  const uint64_t size = file->size();
  if (size % TokenWidth(type) != 0) {
    return absl::DataLossError(absl::StrCat(
        file->path(), ": size ", size, " bytes is not a multiple of the ", TokenTypeName(type),
        " width ", TokenWidth(type), " (truncated at offset ",
        size - size % TokenWidth(type), "?)"));
  }
  return std::unique_ptr<FlatShard>(new FlatShard(std::move(file), type, sample_tokens));
}

std::string FlatShard::FileName() const {
  return std::filesystem::path(file_->path()).filename().string();
}

uint64_t FlatShard::NumSamples() const {
  return (num_tokens_ + sample_tokens_ - 1) / sample_tokens_;
}

uint64_t FlatShard::SampleLength(uint64_t index) const {
  return std::min(sample_tokens_, num_tokens_ - index * sample_tokens_);
}

absl::Status FlatShard::CopyTokens(uint64_t index, uint64_t offset, uint64_t count,
                                   int32_t* out) const {
  const uint64_t start = (index * sample_tokens_ + offset) * TokenWidth(type_);
  return DecodeTokensAt(*file_, start, type_, count, out);
}

}  // namespace zephon::pipeline
