// A tiny Llama 2 style tokenizer.json for tests of the tokenizer and its clients:
// Prepend + Replace normalizers, no pre-tokenizer, byte_fallback BPE over "a" and "b",
// <unk>/<s>/</s> as special added tokens, a BOS template and the Llama 2 decoder chain.
// Ids: <unk> 0, <s> 1, </s> 2, "▁" 3, "a" 4, "b" 5, "▁a" 6, "ab" 7, bytes EF BF BD 8-10.
#ifndef ZEPHON_TOKENIZER_TINY_TOKENIZER_TESTING_H_
#define ZEPHON_TOKENIZER_TINY_TOKENIZER_TESTING_H_

namespace zephon::tokenizer {

inline constexpr char kTinyLlama2Json[] = R"json({
  "version": "1.0",
  "added_tokens": [
    {"id": 0, "content": "<unk>", "special": true, "normalized": false},
    {"id": 1, "content": "<s>", "special": true, "normalized": false},
    {"id": 2, "content": "</s>", "special": true, "normalized": false}
  ],
  "normalizer": {"type": "Sequence", "normalizers": [
    {"type": "Prepend", "prepend": "▁"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
    "pair": [],
    "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [
    {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"},
    {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "dropout": null, "unk_token": "<unk>", "fuse_unk": true,
    "byte_fallback": true,
    "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "▁": 3, "a": 4, "b": 5, "▁a": 6, "ab": 7,
              "<0xEF>": 8, "<0xBF>": 9, "<0xBD>": 10},
    "merges": ["▁ a", "a b"]}
})json";

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_TINY_TOKENIZER_TESTING_H_
