// libzephon_spm_shim.so: libsentencepiece behind the C interface of spm_shim.h. Built
// as a shared library and loaded into its own link namespace (spm_processor.cc); it links
// nothing of Zephon's.
#include "tokenizer/internal/spm_shim.h"

#include <sentencepiece_processor.h>

#include <exception>
#include <memory>
#include <string>
#include <vector>

struct zspm_model {
  sentencepiece::SentencePieceProcessor processor;
};

namespace {

void Send(zspm_bytes_sink sink, void* context, const std::string& text) {
  sink(context, text.data(), text.size());
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int zspm_abi_version(void) { return ZSPM_ABI_VERSION; }

__attribute__((visibility("default"))) zspm_model* zspm_load(const char* bytes, size_t size,
                                                             zspm_bytes_sink error,
                                                             void* context) {
  try {
    auto model = std::make_unique<zspm_model>();
    const auto status =
        model->processor.LoadFromSerializedProto(std::string_view(bytes, size));
    if (!status.ok()) {
      Send(error, context, status.ToString());
      return nullptr;
    }
    return model.release();
  } catch (const std::exception& e) {
    Send(error, context, e.what());
    return nullptr;
  }
}

__attribute__((visibility("default"))) void zspm_free(zspm_model* model) { delete model; }

__attribute__((visibility("default"))) int zspm_piece_size(const zspm_model* model) {
  return model->processor.GetPieceSize();
}

__attribute__((visibility("default"))) int zspm_bos_id(const zspm_model* model) {
  return model->processor.bos_id();
}

__attribute__((visibility("default"))) int zspm_eos_id(const zspm_model* model) {
  return model->processor.eos_id();
}

__attribute__((visibility("default"))) int zspm_encode(const zspm_model* model,
                                                       const char* text, size_t size,
                                                       zspm_ids_sink out,
                                                       zspm_bytes_sink error, void* context) {
  try {
    std::vector<int> ids;
    const auto status = model->processor.Encode(std::string_view(text, size), &ids);
    if (!status.ok()) {
      Send(error, context, status.ToString());
      return -1;
    }
    out(context, ids.data(), ids.size());
    return 0;
  } catch (const std::exception& e) {
    Send(error, context, e.what());
    return -1;
  }
}

__attribute__((visibility("default"))) int zspm_decode(const zspm_model* model,
                                                       const int* ids, size_t size,
                                                       zspm_bytes_sink out,
                                                       zspm_bytes_sink error, void* context) {
  try {
    std::string text;
    const auto status = model->processor.Decode(std::vector<int>(ids, ids + size), &text);
    if (!status.ok()) {
      Send(error, context, status.ToString());
      return -1;
    }
    Send(out, context, text);
    return 0;
  } catch (const std::exception& e) {
    Send(error, context, e.what());
    return -1;
  }
}

}  // extern "C"
