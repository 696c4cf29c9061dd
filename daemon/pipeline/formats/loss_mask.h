// Loss masks (SFT): which tokens of a sample are trained on (1) and which are not (0).
//
// A token-id dataset reads each record's mask from a field or column
// (DatasetSpec.loss_mask_field) in one of two forms (LossMaskFormat):
//   kValues  a list of 0/1 (JSON: 0, 1, false, true), one per token; its length must
//            equal the record's token count.
//   kSpans   a list of [start, end) pairs of token indices that are trained on; every
//            other token is masked. 0 <= start <= end <= tokens; pairs may overlap and
//            come in any order. JSON: [[0, 3], [7, 9]]; a flat list of even length
//            [0, 3, 7, 9] is the same (Parquet's LIST<INT> columns hold it so).
// A text dataset masks by field instead (TokenizeSpec.loss_on: text_tokenization.h).
// The mask is stored in the node's token cache beside the tokens, one byte per token
// (<key>.msk, token_cache_files.h); datasets without a mask store none.
// Errors are INVALID_ARGUMENT saying what is wrong with both lengths or the bad value;
// callers prefix the file and record. Pure functions and a single-owner scanner.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_LOSS_MASK_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_LOSS_MASK_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace zephon::pipeline {

enum class LossMaskFormat { kValues, kSpans };

// "values" / "spans".
const char* LossMaskFormatName(LossMaskFormat format);

// Where a token-id dataset's masks come from; an empty `field` means none.
struct LossMaskSource {
  std::string field;
  LossMaskFormat format = LossMaskFormat::kValues;

  bool enabled() const { return !field.empty(); }
};

// Sets *mask to `tokens` bytes from `values` (each 0 or 1). INVALID_ARGUMENT when the
// counts differ (naming both) or a value is neither.
absl::Status MaskFromValues(absl::Span<const int64_t> values, uint64_t tokens,
                            std::vector<uint8_t>* mask);

// Sets *mask to `tokens` bytes, 1 inside the [start, end) pairs of `flat_pairs`
// (start0, end0, start1, end1, ...). INVALID_ARGUMENT for an odd count or a pair out
// of [0, tokens] or reversed (naming it).
absl::Status MaskFromSpans(absl::Span<const int64_t> flat_pairs, uint64_t tokens,
                           std::vector<uint8_t>* mask);

// Reads a JSONL line's mask field. The line is already known to be one valid JSON
// object (the token scan validated it). Single-owner; reuses its parser.
class LossMaskScanner {
 public:
  explicit LossMaskScanner(LossMaskSource source);
  ~LossMaskScanner();
  LossMaskScanner(const LossMaskScanner&) = delete;
  LossMaskScanner& operator=(const LossMaskScanner&) = delete;

  // Sets *mask for a record of `tokens` tokens. INVALID_ARGUMENT naming the field: it
  // is missing, not a list, holds something other than integers/booleans (values) or
  // integer pairs (spans), or fails MaskFromValues / MaskFromSpans.
  absl::Status Scan(std::string_view line, uint64_t tokens, std::vector<uint8_t>* mask);

 private:
  struct Parser;
  const LossMaskSource source_;
  const std::unique_ptr<Parser> parser_;
  std::vector<int64_t> numbers_;
};

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_LOSS_MASK_H_
