#include "client/encode_batch.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace zephon::client {

namespace {

// Documents a thread claims at a time: small enough to balance skewed lengths,
// large enough that the shared counter is not contended.
constexpr size_t kDocsPerClaim = 16;

}  // namespace

absl::StatusOr<EncodedBatch> EncodeBatch(const tokenizer::Tokenizer& tokenizer,
                                         absl::Span<const std::string_view> texts,
                                         tokenizer::SpecialTokens mode, uint32_t num_threads) {
  if (absl::Status s = tokenizer.CheckSpecialTokens(mode); !s.ok()) return s;
  const size_t n = texts.size();
  std::vector<std::vector<int32_t>> per_doc(n);
  std::vector<absl::Status> status(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (;;) {
      const size_t begin = next.fetch_add(kDocsPerClaim, std::memory_order_relaxed);
      if (begin >= n) return;
      const size_t end = std::min(n, begin + kDocsPerClaim);
      for (size_t i = begin; i < end; ++i) {
        status[i] = tokenizer.Encode(texts[i], mode, &per_doc[i]);
      }
    }
  };
  if (num_threads == 0) num_threads = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>(num_threads, (n + kDocsPerClaim - 1) / kDocsPerClaim);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();  // the calling thread is one of them
  for (std::thread& t : pool) t.join();

  EncodedBatch out;
  out.offsets.reserve(n + 1);
  out.offsets.push_back(0);
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!status[i].ok()) {
      return absl::Status(status[i].code(),
                          absl::StrCat("document ", i, ": ", status[i].message()));
    }
    total += per_doc[i].size();
  }
  out.ids.reserve(total);
  for (size_t i = 0; i < n; ++i) {
    out.ids.insert(out.ids.end(), per_doc[i].begin(), per_doc[i].end());
    std::vector<int32_t>().swap(per_doc[i]);
    out.offsets.push_back(out.ids.size());
  }
  return out;
}

}  // namespace zephon::client
