#include "daemon/pipeline/ordering/shuffle_buffer.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/mix.h"
#include "daemon/pipeline/ordering/permutation.h"

namespace zephon::pipeline {
namespace {

// Salts the row shuffle's key: a shuffle before and one after packing with the same
// seed must not draw the same indices.
constexpr uint64_t kRowShuffleSalt = 0x5A0F1E5ULL;

void StreamingOrder(uint64_t buffer_size, uint64_t key, uint64_t n,
                    std::vector<uint64_t>* order) {
  std::vector<uint64_t> buffer;
  uint64_t counter = 0;
  for (uint64_t item = 0; item < n; ++item) {
    if (buffer.size() < buffer_size) {
      buffer.push_back(item);
      continue;
    }
    const uint64_t r = Combine(key, counter++) % buffer_size;
    order->push_back(buffer[r]);
    buffer[r] = item;
  }
  while (!buffer.empty()) {
    const uint64_t r = Combine(key, counter++) % buffer.size();
    order->push_back(buffer[r]);
    buffer[r] = buffer.back();
    buffer.pop_back();
  }
}

// The next block_warmup block size after `size`.
uint64_t GrowBlock(uint64_t size, uint64_t buffer_size, double growth) {
  const double grown = std::floor(static_cast<double>(size) * growth);
  // Compared as doubles first: a huge product must not overflow the cast.
  if (grown >= static_cast<double>(buffer_size)) return buffer_size;
  return std::min(buffer_size, std::max(size + 1, static_cast<uint64_t>(grown)));
}

}  // namespace

absl::StatusOr<ShuffleAlgorithm> ParseShuffleAlgorithm(std::string_view name) {
  if (name.empty() || name == "streaming") return ShuffleAlgorithm::kStreaming;
  if (name == "block") return ShuffleAlgorithm::kBlock;
  if (name == "block_warmup") return ShuffleAlgorithm::kBlockWarmup;
  return absl::InvalidArgumentError(absl::StrCat(
      "shuffle.algorithm '", std::string(name),
      "' is not one of streaming, block, block_warmup"));
}

const char* ShuffleAlgorithmName(ShuffleAlgorithm algorithm) {
  switch (algorithm) {
    case ShuffleAlgorithm::kStreaming: return "streaming";
    case ShuffleAlgorithm::kBlock: return "block";
    case ShuffleAlgorithm::kBlockWarmup: return "block_warmup";
  }
  return "?";
}

uint64_t ShuffleKey(uint64_t seed, uint32_t lane, uint64_t flush_group_first_chunk) {
  return Combine(Combine(seed, lane), flush_group_first_chunk);
}

uint64_t RowShuffleKey(uint64_t seed, uint32_t lane, uint64_t flush_group_first_chunk) {
  return Combine(ShuffleKey(seed, lane, flush_group_first_chunk), kRowShuffleSalt);
}

uint64_t FirstWarmupBlock(uint64_t buffer_size) {
  return std::max<uint64_t>(1, std::min<uint64_t>(128, buffer_size / 16));
}

void ShuffleOrder(const ShuffleOptions& options, uint64_t key, uint64_t n,
                  std::vector<uint64_t>* order) {
  order->clear();
  order->reserve(n);
  if (options.algorithm == ShuffleAlgorithm::kStreaming) {
    StreamingOrder(options.buffer_size, key, n, order);
    return;
  }
  uint64_t size = options.algorithm == ShuffleAlgorithm::kBlock
                      ? options.buffer_size
                      : FirstWarmupBlock(options.buffer_size);
  uint64_t begin = 0;
  for (uint64_t block = 0; begin < n; ++block) {
    const uint64_t len = std::min(size, n - begin);
    const Permutation permutation(len, Combine(key, block));
    for (uint64_t j = 0; j < len; ++j) order->push_back(begin + permutation.Permute(j));
    begin += len;
    if (options.algorithm == ShuffleAlgorithm::kBlockWarmup) {
      size = GrowBlock(size, options.buffer_size, options.warmup_growth);
    }
  }
}

void BufferShuffle(uint64_t buffer_size, uint64_t key, std::vector<SampleId>* items) {
  ShuffleOptions options;
  options.buffer_size = buffer_size;
  ApplyShuffle(options, key, items);
}

}  // namespace zephon::pipeline
