#include "daemon/pipeline/ordering/block_shuffle.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/mix.h"
#include "daemon/pipeline/ordering/permutation.h"

namespace zephon::pipeline {
namespace {

// 0 for "", auto/global handled by the caller; the number otherwise.
absl::StatusOr<uint64_t> ParseNumber(const std::string& option) {
  uint64_t n = 0;
  const bool digits = !option.empty() && option.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || !absl::SimpleAtoi(option, &n) || n == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("work_source.shuffle_block_size '", option,
                     "' invalid: expected \"\" (off), a number >= 1, \"auto\" or \"global\""));
  }
  return n;
}

}  // namespace

absl::Status ValidateBlockShuffle(const std::string& option) {
  if (option.empty() || option == "auto" || option == "global") return absl::OkStatus();
  return ParseNumber(option).status();
}

absl::StatusOr<std::vector<uint64_t>> ResolveBlockSizes(
    const std::string& option, const std::vector<std::shared_ptr<const Dataset>>& datasets) {
  std::vector<uint64_t> sizes(datasets.size(), 0);
  if (option.empty()) return sizes;
  uint64_t wanted = 0;  // 0 here: "global".
  if (option == "auto") {
    uint64_t largest = 0;
    for (const auto& d : datasets) {
      for (uint32_t s = 0; s < d->NumShards(); ++s) largest = std::max(largest, d->ShardSamples(s));
    }
    wanted = std::max<uint64_t>(1, largest) * kAutoBlockShards;
  } else if (option != "global") {
    auto n = ParseNumber(option);
    if (!n.ok()) return n.status();
    wanted = *n;
  }
  for (size_t k = 0; k < datasets.size(); ++k) {
    const uint64_t n = datasets[k]->NumSamples();
    sizes[k] = wanted == 0 ? n : std::min(wanted, n);
  }
  return sizes;
}

uint64_t BlockShufflePosition(uint64_t p, uint64_t pass_size, uint64_t block_size,
                              uint64_t pass_seed) {
  const uint64_t b = p / block_size;
  const uint64_t start = b * block_size;
  const uint64_t len = std::min(block_size, pass_size - start);
  return start + Permutation(len, Combine(pass_seed ^ kBlockShuffleSalt, b)).Permute(p - start);
}

uint64_t BlockShuffleInverse(uint64_t q, uint64_t pass_size, uint64_t block_size,
                             uint64_t pass_seed) {
  const uint64_t b = q / block_size;  // a block maps onto itself
  const uint64_t start = b * block_size;
  const uint64_t len = std::min(block_size, pass_size - start);
  return start + Permutation(len, Combine(pass_seed ^ kBlockShuffleSalt, b)).Inverse(q - start);
}

}  // namespace zephon::pipeline
