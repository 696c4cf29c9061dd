// HF tokenizers decoders: turn token strings back into text. Supported: ByteLevel,
// Replace (string pattern), ByteFallback, Fuse, Strip, Metaspace, and Sequence of them
// (enough for GPT-2/Llama 3/Qwen byte-level and Llama 2 style tokenizers). Each step maps
// a list of token strings to a list, as HF's decode_chain does; the result is their
// concatenation (or, with no decoder at all, the tokens joined by spaces, as HF does).
//
// Thread-safety: immutable after construction; Decode is const and thread-safe.
#ifndef ZEPHON_TOKENIZER_DECODER_H_
#define ZEPHON_TOKENIZER_DECODER_H_

#include <string>
#include <vector>

namespace zephon::tokenizer {

struct DecoderStep {
  enum class Kind { kByteLevel, kReplace, kByteFallback, kFuse, kStrip, kMetaspace };
  enum class Prepend { kAlways, kFirst, kNever };
  Kind kind;
  std::string pattern;  // kReplace
  std::string content;  // kReplace: replacement; kStrip: the character; kMetaspace: it
  int start = 0;        // kStrip: characters removed at the start of each token
  int stop = 0;         // kStrip: ... and at the end
  Prepend prepend_scheme = Prepend::kAlways;  // kMetaspace
};

class Decoder {
 public:
  explicit Decoder(std::vector<DecoderStep> steps, bool present)
      : steps_(std::move(steps)), present_(present) {}

  // The text of `tokens` (their vocabulary strings, byte-level characters included).
  std::string Decode(std::vector<std::string> tokens) const;

 private:
  std::vector<DecoderStep> steps_;  // fixed at construction
  bool present_;  // false: tokenizer.json had "decoder": null
};

// GPT-2's byte-to-character table: the character (UTF-8) standing for each byte.
const std::string& ByteLevelChar(unsigned char b);
// The byte a byte-level character stands for, or -1 (cp is a code point).
int ByteOfByteLevelChar(char32_t cp);

}  // namespace zephon::tokenizer

#endif  // ZEPHON_TOKENIZER_DECODER_H_
