// The C++ client's batch encode: many documents through one tokenizer::Tokenizer on a
// few threads, ids in input order. What zephon_tokenizer_encode_batch (c_api.h) and so
// zephon.Tokenizer.encode_batch run; the daemon's tokenize stage has its own worker pool.
//
// Thread-safety: EncodeBatch is reentrant; it only reads the (thread-safe) Tokenizer.
#ifndef ZEPHON_CLIENT_ENCODE_BATCH_H_
#define ZEPHON_CLIENT_ENCODE_BATCH_H_

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "tokenizer/tokenizer.h"

namespace zephon::client {

// The ids of every document, concatenated: document i is
// ids[offsets[i], offsets[i + 1]); offsets has texts.size() + 1 entries.
struct EncodedBatch {
  std::vector<int32_t> ids;
  std::vector<uint64_t> offsets;
};

// Encodes `texts` (any bytes; invalid UTF-8 is replaced as Tokenizer::Encode does) with
// `mode` on up to num_threads threads, the calling one included (num_threads 0 = one per
// hardware thread; documents are claimed a few at a time, so a short batch uses fewer).
// The result does not depend on num_threads: document i's ids equal
// tokenizer.Encode(texts[i], mode). The texts must stay valid for the call.
// Errors: FAILED_PRECONDITION when `mode` needs a BOS/EOS the tokenizer lacks (checked
// before any document is encoded); otherwise the first failing document's error, by
// index, with its index in the message.
absl::StatusOr<EncodedBatch> EncodeBatch(const tokenizer::Tokenizer& tokenizer,
                                         absl::Span<const std::string_view> texts,
                                         tokenizer::SpecialTokens mode, uint32_t num_threads);

}  // namespace zephon::client

#endif  // ZEPHON_CLIENT_ENCODE_BATCH_H_
