// Text to token ids, exact to the reference implementation: an HF tokenizer.json (HF
// tokenizers' semantics) or a SentencePiece .model (libsentencepiece). This is the one
// tokenizer the daemon's tokenize stage, the token cache and the client's C ABI share.
//
// A Tokenizer is created once (all validation happens there: anything unsupported is
// refused naming the JSON path of the component) and is then immutable.
// Memory: Encode of one huge text holds, besides the ids it returns, a bounded window of
// it: added tokens are found without copying, the normalizer takes the text in chunks cut
// where normalization cannot join across, the pre-tokenizer decodes a window at a time and
// streams each word into BPE as it is found. What must be held whole (one pre-tokenized
// word, text with no place to cut it for a tokenizer that does not pre-tokenize, a piece
// a normalizer cannot chunk, a SentencePiece document) is bounded by
// TokenizerOptions::max_unsplit_bytes. A text with invalid UTF-8 is copied once (U+FFFD in
// place of the invalid bytes) first.
//
// Thread-safety: thread-safe. Encode and Decode are const and reentrant; callers may share
// one Tokenizer across any number of threads.
#ifndef ZEPHON_TOKENIZER_TOKENIZER_H_
#define ZEPHON_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace zephon::tokenizer {

// Which special tokens Encode adds around the text.
enum class SpecialTokens {
  kNone,              // the text's tokens only (HF add_special_tokens=false)
  kBos,               // bos_token_id first
  kEos,               // eos_token_id last
  kBosEos,            // both
  kTokenizerDefault,  // what the tokenizer itself adds (HF add_special_tokens=true:
                      // its post_processor); SentencePiece models add nothing
};

// Parses "none", "bos", "eos", "bos_eos", "tokenizer_default".
// Errors: INVALID_ARGUMENT naming the value and the accepted ones.
absl::StatusOr<SpecialTokens> ParseSpecialTokens(std::string_view name);

struct TokenizerOptions {
  // Match special added tokens as plain text (HF's split_special_tokens /
  // encode_special_tokens). Non-special added tokens are still matched.
  bool split_special_tokens = false;
  // Override the BOS/EOS the tokenizer files name (e.g. Pipeline.tokenize's bos_token_id).
  std::optional<int32_t> bos_token_id;
  std::optional<int32_t> eos_token_id;
  // The longest stretch of one text Encode holds whole (see "Memory" above); a text that
  // needs a longer one is refused with RESOURCE_EXHAUSTED. 0 = no limit. Holding a stretch
  // costs about 40 bytes per byte (decoded characters, BPE symbols); a SentencePiece text,
  // about 130 (docs/benchmarks.md), so the default keeps one document under ~1 GB.
  size_t max_unsplit_bytes = kDefaultMaxUnsplitBytes;
  // Testing: how much of a text Encode takes at a time (the split scanner's window in
  // characters, the normalizer's chunk and a one-word piece's part in bytes); 0 = the
  // defaults. Ids never depend on it; tests make it small to cross many window edges.
  size_t window_for_testing = 0;

  static constexpr size_t kDefaultMaxUnsplitBytes = size_t{8} << 20;
};

class Tokenizer {
 public:
  // An HF tokenizer.json. `config_json`, when not empty, is the model's
  // tokenizer_config.json: its bos_token / eos_token name BOS and EOS. Without it they
  // come from the post_processor's template, else from well-known token names.
  // The file's "truncation" and "padding" are ignored: lengths belong to the caller
  // (Pipeline.tokenize's max_length), and a saved tokenizer often carries stale ones.
  // Errors: INVALID_ARGUMENT naming the JSON path of a malformed or unsupported component.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(
      std::string_view json, const TokenizerOptions& options = {},
      std::string_view config_json = "");

  // A SentencePiece model (the bytes of a .model file).
  // Errors: INVALID_ARGUMENT when libsentencepiece cannot parse it; FAILED_PRECONDITION
  // when libzephon_spm_shim.so (which holds libsentencepiece) cannot be found or loaded.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromSentencePieceModel(
      std::string_view model_bytes, const TokenizerOptions& options = {});

  // `path` is a tokenizer.json file, a directory holding tokenizer.json (and optionally
  // tokenizer_config.json), or a SentencePiece .model file (by its extension).
  // Errors: NOT_FOUND / INVALID_ARGUMENT naming the path, plus the factories' errors.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& path,
                                                         const TokenizerOptions& options = {});

  virtual ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // Appends the ids of `text` to *ids. Invalid UTF-8 is replaced by U+FFFD first (as
  // Python's errors="replace"). Errors: FAILED_PRECONDITION when `mode` needs a BOS or
  // EOS the tokenizer does not define (name it with TokenizerOptions).
  absl::Status Encode(std::string_view text, SpecialTokens mode,
                      std::vector<int32_t>* ids) const;
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                              SpecialTokens mode = SpecialTokens::kNone) const;
  // Encode for text the caller has already checked or repaired (the JSONL conversion
  // validates every line): the same ids, without Encode's own pass over the bytes.
  // REQUIRES: `text` is valid UTF-8 (else the ids are unspecified; never a crash).
  absl::Status EncodeValidUtf8(std::string_view text, SpecialTokens mode,
                               std::vector<int32_t>* ids) const;

  // OK when Encode can honour `mode` (check once at setup instead of per document).
  absl::Status CheckSpecialTokens(SpecialTokens mode) const;

  // The text of `ids`, special tokens included, as the reference decodes it.
  // Errors: OUT_OF_RANGE naming the first id that is not in the vocabulary.
  virtual absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const = 0;

  // One past the largest id the tokenizer can produce (added tokens included).
  virtual int32_t vocab_size() const = 0;
  std::optional<int32_t> bos_token_id() const { return bos_; }
  std::optional<int32_t> eos_token_id() const { return eos_; }

  // "sha256:<hex>" of the canonical tokenizer.json (object keys sorted, no whitespace) or
  // of the model bytes, plus the options that change ids. Equal fingerprints mean equal
  // ids for every text; it keys token caches and enters the pipeline's spec hash.
  const std::string& fingerprint() const { return fingerprint_; }

 protected:
  struct Common {
    std::optional<int32_t> bos, eos;
    std::vector<int32_t> default_prefix, default_suffix;  // kTokenizerDefault
    std::string fingerprint;
    size_t window = 0;  // TokenizerOptions::window_for_testing
    size_t max_unsplit_bytes = TokenizerOptions::kDefaultMaxUnsplitBytes;
  };
  explicit Tokenizer(Common common);

  // Appends the ids of valid UTF-8 `text`, no special tokens around it.
  virtual absl::Status EncodeText(std::string_view text, std::vector<int32_t>* ids) const = 0;

  size_t window() const { return window_; }
  size_t max_unsplit_bytes() const { return max_unsplit_bytes_; }
  // RESOURCE_EXHAUSTED: `what` (a part of the text) is longer than max_unsplit_bytes().
  absl::Status TooLong(std::string_view what) const;

 private:
  const std::optional<int32_t> bos_, eos_;
  const std::vector<int32_t> default_prefix_, default_suffix_;
  const std::string fingerprint_;
  const size_t window_, max_unsplit_bytes_;
};

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_TOKENIZER_H_
