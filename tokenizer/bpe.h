// The BPE model of HF tokenizers: a word (one pre-tokenized piece) becomes ids by starting
// from its characters (or bytes, for byte-level vocabularies) and repeatedly applying the
// lowest-ranked merge, leftmost first, exactly as tokenizers' Word::merge_all does.
// Supports byte_fallback (<0xXX> tokens), unk_token with fuse_unk, and ignore_merges.
//
// Thread-safety: immutable after Create; Encode is const and thread-safe. Each thread keeps
// its own word cache per Bpe (bounded: kMaxCacheEntries words, kMaxCachesPerThread Bpes),
// so no lock is taken.
#ifndef ZEPHON_TOKENIZER_BPE_H_
#define ZEPHON_TOKENIZER_BPE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"

namespace zephon::tokenizer {

struct BpeOptions {
  // Initial symbols are single bytes (a byte-level vocabulary already mapped back to raw
  // bytes) instead of UTF-8 characters.
  bool byte_units = false;
  bool byte_fallback = false;
  bool ignore_merges = false;
  bool fuse_unk = false;
  std::optional<std::string> unk_token;
};

class Bpe {
 public:
  // vocab: (token, id) pairs; merges: pairs of tokens in rank order (a later duplicate
  // wins, as in HF). `where` prefixes error messages (e.g. "tokenizer.json: model").
  // Errors: INVALID_ARGUMENT naming the entry when a merge names a token missing from the
  // vocabulary, when two tokens share an id, or when unk_token is not in the vocabulary.
  static absl::StatusOr<std::unique_ptr<Bpe>> Create(
      std::vector<std::pair<std::string, int32_t>> vocab,
      const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
      std::string_view where);

  ~Bpe();
  Bpe(const Bpe&) = delete;
  Bpe& operator=(const Bpe&) = delete;

  // Appends the ids of `word` to *ids. Empty words produce nothing.
  void Encode(std::string_view word, std::vector<int32_t>* ids) const;

  // The largest offset k, 0 < k < word.size(), at which `word` can be cut with
  // Encode(word[0,k)) + Encode(word[k..]) == Encode(word) (encoding a huge word in parts):
  // the characters (bytes, when byte_units) on both sides of k are tokens themselves, and no
  // merge's left token ends with the one while its right token starts with the other, so
  // no merge ever joins across k. 0 when there is none (always with ignore_merges, which
  // looks whole words up). REQUIRES: word is valid UTF-8.
  size_t LastSafeCut(std::string_view word) const;

  // The id of an exact token, or -1.
  int32_t TokenToId(std::string_view token) const;
  // The token of an id (raw bytes when byte_units), or nullptr when the id is unused.
  const std::string* IdToToken(int32_t id) const;
  // One past the largest id.
  int32_t id_limit() const { return static_cast<int32_t>(id_to_token_.size()); }

  // Per-thread cache bound; a full cache is cleared (cheap and keeps memory bounded).
  static constexpr size_t kMaxCacheEntries = 1 << 16;
  // Caches kept per thread (one per recently used Bpe); the least recently created goes.
  static constexpr size_t kMaxCachesPerThread = 8;
  // Longer words are not cached (HF's MAX_LENGTH is 256 as well).
  static constexpr size_t kMaxCachedWordBytes = 256;

 private:
  struct Symbol;
  using WordCache = absl::flat_hash_map<std::string, std::vector<int32_t>>;

  Bpe(BpeOptions options, uint64_t uid) : options_(std::move(options)), uid_(uid) {}
  WordCache* ThreadCache() const;
  void MergeWord(std::string_view word, std::vector<int32_t>* ids) const;
  void InitialSymbols(std::string_view word, std::vector<Symbol>* symbols) const;
  // (rank << 32 | new id) of the merge of (a, b), or -1.
  int64_t MergeOf(int32_t a, int32_t b) const;
  // The unit (byte or code point) ending / starting a token, and whether it is a token.
  uint32_t LastUnit(std::string_view token) const;
  uint32_t FirstUnit(std::string_view token) const;
  bool UnitIsToken(std::string_view unit) const;

  const BpeOptions options_;
  const uint64_t uid_;  // keys the per-thread caches; never reused
  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> id_used_;
  absl::flat_hash_map<uint64_t, int64_t> merges_;
  int32_t byte_ids_[256];      // byte_units: the id of each single byte, or -1
  int32_t fallback_ids_[256];  // byte_fallback: the id of "<0xXX>", or -1
  int32_t unk_id_ = -1;
  // (LastUnit(left) << 32 | FirstUnit(right)) of every merge, for LastSafeCut; built on its
  // first call (most tokenizers pre-tokenize and never ask).
  mutable absl::once_flag joinable_once_;
  mutable absl::flat_hash_set<uint64_t> joinable_;
};

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_BPE_H_
