// The HF tokenizer.json pipeline, assembled by the loader (hf_json.cc, Tokenizer::FromJson):
// added tokens in the raw text -> normalizer per remaining piece -> added tokens in the
// normalized pieces -> pre-tokenizer -> BPE per word, as HF tokenizers' encode does.
// Each stage streams into the next (see "Memory" in tokenizer.h): a huge piece is
// normalized in chunks when the normalizer allows it and no added token is matched in
// normalized text, and its words go to BPE as the pre-tokenizer finds them.
//
// Thread-safety: immutable after construction; thread-safe (see Tokenizer).
#ifndef ZEPHON_TOKENIZER_HF_TOKENIZER_H_
#define ZEPHON_TOKENIZER_HF_TOKENIZER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace zephon::tokenizer {

struct HfParts {
  std::optional<Normalizer> normalizer;
  PreTokenizer pre_tokenizer{{}};
  std::unique_ptr<Bpe> bpe;
  // Added tokens matched in the raw text (normalized=false) and in normalized pieces.
  std::unique_ptr<AddedTokens> raw_added, normalized_added;
  // Decode: the vocabulary string of each id as tokenizer.json spells it (byte-level
  // characters kept), added tokens included.
  absl::flat_hash_map<int32_t, std::string> decode_tokens;
  Decoder decoder{{}, false};
  int32_t vocab_size = 0;
};

class HfTokenizer final : public Tokenizer {
 public:
  HfTokenizer(Common common, HfParts parts) : Tokenizer(std::move(common)), p_(std::move(parts)) {}

  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids) const override;
  int32_t vocab_size() const override { return p_.vocab_size; }

 protected:
  absl::Status EncodeText(std::string_view text, std::vector<int32_t>* ids) const override;

 private:
  // One piece of the text between raw added tokens.
  absl::Status EncodeSegment(std::string_view raw, bool at_text_start,
                             std::vector<int32_t>* ids) const;
  // Normalizes `raw` a chunk at a time into one pre-tokenizer stream.
  absl::Status EncodeChunked(std::string_view raw, bool at_text_start,
                             std::vector<int32_t>* ids) const;
  absl::Status EncodeNormalized(std::string_view piece, bool at_text_start,
                                std::vector<int32_t>* ids) const;
  // Runs `feed` on a stream that pre-tokenizes a normalized piece arriving in chunks and
  // encodes its words into *ids.
  absl::Status WithStream(bool at_text_start, std::vector<int32_t>* ids,
                          absl::FunctionRef<absl::Status(PreTokenizerStream&)> feed) const;
  // The pre-tokenizer stream's RESOURCE_EXHAUSTED, said as the Tokenizer says it.
  absl::Status StreamError(absl::Status s) const;

  const HfParts p_;
};

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_HF_TOKENIZER_H_
