// SentencePiece models, through libzephon_spm_shim.so (spm_shim.h). Debian's
// libsentencepiece embeds protobuf 3.14, and zephond and libzephon_c.so also load gRPC's
// protobuf 3.21; in one link namespace the two collide and the process crashes. So only the
// shim links libsentencepiece, and this class loads it once per process with
// dlmopen(LM_ID_NEWLM), where its protobuf, libstdc++ and libc resolve apart from ours.
//
// The shim is looked for, in order: at $ZEPHON_SPM_SHIM; next to the object holding this
// code (libzephon_c.so in zephon/_native, zephond, a bazel binary) and in a `tokenizer/`
// folder beside it or beside any of its parents (bazel-bin's layout); in bazel runfiles.
//
// Thread-safety: Encode and Decode are const and thread-safe (as SentencePiece's are).
#ifndef ZEPHON_TOKENIZER_INTERNAL_SPM_PROCESSOR_H_
#define ZEPHON_TOKENIZER_INTERNAL_SPM_PROCESSOR_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

struct zspm_model;  // spm_shim.h

namespace zephon::tokenizer::internal {

struct SpmShim;  // the shim's dlsym'd functions

class SpmProcessor {
 public:
  // The shim's file name, installed next to libzephon_c.so by `make build`.
  static constexpr char kShimName[] = "libzephon_spm_shim.so";

  // True when the shim is loaded (the first call loads it, once per process); otherwise
  // false and *error names the paths tried or the loader's reason, and the fix.
  static bool ShimAvailable(std::string* error);

  // nullptr and *error set when the bytes are not a SentencePiece model.
  // REQUIRES: ShimAvailable().
  static std::unique_ptr<SpmProcessor> Load(std::string_view model_bytes, std::string* error);
  ~SpmProcessor();
  SpmProcessor(const SpmProcessor&) = delete;
  SpmProcessor& operator=(const SpmProcessor&) = delete;

  bool Encode(std::string_view text, std::vector<int>* ids, std::string* error) const;
  bool Decode(const std::vector<int>& ids, std::string* text, std::string* error) const;
  int piece_size() const;
  int bos_id() const;  // -1 when the model has none
  int eos_id() const;

 private:
  SpmProcessor(const SpmShim* shim, zspm_model* model);
  const SpmShim* const shim_;  // process-lifetime
  zspm_model* const model_;    // owned; freed by the shim
};

}  // namespace zephon::tokenizer::internal

#endif  // ZEPHON_TOKENIZER_INTERNAL_SPM_PROCESSOR_H_
