// TextTokenization: the resolved `tokenize` operator, as the formats layer sees it.
//
// A JSONL dataset opened with a TextTokenization is a *text* dataset: each record's
// string field `field` is encoded with `tokenizer` and the resulting ids are the
// record's sample(s). Without one, a JSONL dataset holds token-id arrays (jsonl_field),
// as before. The pipeline layer (spec.h) builds this from the spec's TokenizeSpec; the
// formats layer (jsonl_reader.h) converts each shard once into the node's token cache,
// whose key covers CacheKeyBytes().
//
// Samples of a text record (in this order):
//   ids = tokenizer->Encode(text, special_tokens)   (invalid UTF-8 -> U+FFFD, counted)
//   long_samples kKeep:     one sample, however long (max_length ignored).
//   long_samples kTruncate: one sample, ids cut to the first max_length.
//   long_samples kSplit:    ceil(len / max_length) samples ("children"), in order: the
//                           i-th holds ids[i*max_length, (i+1)*max_length). An empty
//                           encoding is one empty sample.
//   A record whose field is missing or not a string: an error naming the file and the
//   1-based line, unless skip_missing (then it yields no sample and is counted).
// Plain value type; thread-compatible. The tokenizer is shared and thread-safe.
#ifndef ZEPHON_DAEMON_PIPELINE_FORMATS_TEXT_TOKENIZATION_H_
#define ZEPHON_DAEMON_PIPELINE_FORMATS_TEXT_TOKENIZATION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace zephon::pipeline {

inline constexpr char kDefaultTextField[] = "text";

struct TextTokenization {
  enum class LongSamples { kKeep, kTruncate, kSplit };

  // Loaded with the spec's bos/eos overrides and split_special_tokens (its fingerprint
  // covers them). Never null in a valid TextTokenization.
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer;
  std::string field = kDefaultTextField;
  tokenizer::SpecialTokens special_tokens = tokenizer::SpecialTokens::kBosEos;
  // 0 = no limit (then long_samples must be kKeep).
  uint64_t max_length = 0;
  LongSamples long_samples = LongSamples::kKeep;
  bool skip_missing = false;
  // Prompt/completion (TokenizeSpec.fields, 2+ names): each record's string fields,
  // tokenized in this order and concatenated into one encoding (text_convert.h:
  // BOS, per special_tokens, before the first field's tokens, EOS after the last's);
  // then long_samples applies to the whole. Empty: `field` alone.
  std::vector<std::string> fields;
  // With `fields`: loss_on[i] says whether fields[i]'s tokens are trained on (loss
  // mask 1; BOS counts with the first field, EOS with the last). Empty: no loss mask.
  std::vector<bool> loss_on;
  // Record pipelines' keep_payload (TokenizeSpec.keep_payload; one `field` only): the cache
  // also keeps each sample's source record as a JSON object (ShardReader::CopyPayload): a
  // JSONL line whole (valid UTF-8, as tokenized), a record format's {"<field>": text}.
  // Every piece of a split record keeps the whole record. Part of the cache key
  // (TextCacheKeyBytes), not of the dataset fingerprint: it changes no sample.
  bool keep_payload = false;
};

// Whether the samples of `text` carry a loss mask (stored as the cache's .msk).
inline bool TextHasLossMask(const TextTokenization& text) { return !text.loss_on.empty(); }

}  // namespace zephon::pipeline

#endif  // ZEPHON_DAEMON_PIPELINE_FORMATS_TEXT_TOKENIZATION_H_
