// The tokenizer half of the C ABI (c_api.h, "Tokenizer"): forwards to
// tokenizer::Tokenizer and client::EncodeBatch, converting Status to the C
// conventions.
#include "client/c_api.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/c_api_internal.h"
#include "client/encode_batch.h"
#include "tokenizer/tokenizer.h"

struct zephon_tokenizer {
  std::unique_ptr<zephon::tokenizer::Tokenizer> tokenizer;
};

namespace {

using zephon::client::c_api::Dup;
using zephon::client::c_api::Fail;
using zephon::client::c_api::OrEmpty;
using zephon::tokenizer::SpecialTokens;
using zephon::tokenizer::Tokenizer;
using zephon::tokenizer::TokenizerOptions;

absl::StatusOr<TokenizerOptions> ToOptions(const zephon_tokenizer_options* in) {
  TokenizerOptions out;
  if (in == nullptr) return out;
  if (in->struct_size != sizeof(zephon_tokenizer_options)) {
    return absl::InvalidArgumentError(
        absl::StrCat("zephon_tokenizer_options.struct_size is ", in->struct_size,
                     " but this library (C API version ", ZEPHON_C_API_VERSION, ") has a ",
                     sizeof(zephon_tokenizer_options),
                     "-byte zephon_tokenizer_options; set struct_size = "
                     "sizeof(zephon_tokenizer_options) "
                     "and build the caller against this library's c_api.h"));
  }
  out.split_special_tokens = in->split_special_tokens != 0;
  auto id_option = [](int32_t id, const char* name, std::optional<int32_t>* field) -> absl::Status {
    if (id >= 0) *field = id;
    if (id >= -1) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is ", id, "; pass a token id >= 0, or -1 for the tokenizer's own"));
  };
  if (absl::Status s = id_option(in->bos_token_id, "bos_token_id", &out.bos_token_id); !s.ok()) {
    return s;
  }
  if (absl::Status s = id_option(in->eos_token_id, "eos_token_id", &out.eos_token_id); !s.ok()) {
    return s;
  }
  return out;
}

// Local paths only: the client library has no object-store access.
absl::Status CheckLocalPath(const std::string& path) {
  const size_t scheme_end = path.find("://");
  if (scheme_end == std::string::npos || path.find('/') < scheme_end) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("tokenizer '", path, "': the client library reads local paths only, not ",
                   path.substr(0, scheme_end),
                   ":// URLs; download the tokenizer first (e.g. `aws s3 cp "
                   "--recursive <url> ./tokenizer`) and pass the local file or directory"));
}

// Errors of the factories name the JSON path of the component; say which file
// too.
absl::Status NamingPath(const absl::Status& status, const std::string& path) {
  if (absl::StrContains(status.message(), path)) return status;
  return absl::Status(status.code(), absl::StrCat("tokenizer '", path, "': ", status.message()));
}

int Loaded(absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer, zephon_tokenizer** out,
           char** error) {
  if (!tokenizer.ok()) return Fail(tokenizer.status(), error);
  *out = new zephon_tokenizer{*std::move(tokenizer)};
  return 0;
}

// A malloc'ed copy of `v` (NULL when empty) for the caller to
// zephon_free_array.
template <typename T>
absl::StatusOr<T*> CopyOut(const std::vector<T>& v) {
  if (v.empty()) return nullptr;
  T* p = static_cast<T*>(std::malloc(v.size() * sizeof(T)));
  if (p == nullptr) {
    return absl::ResourceExhaustedError(
        absl::StrCat("out of memory copying ", v.size(), " values out"));
  }
  std::memcpy(p, v.data(), v.size() * sizeof(T));
  return p;
}

absl::Status CheckHandle(const zephon_tokenizer* tokenizer, const char* fn) {
  if (tokenizer != nullptr) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(fn, ": tokenizer is NULL (load one first)"));
}

}  // namespace

extern "C" {

int zephon_tokenizer_load(const char* path, const zephon_tokenizer_options* options,
                          zephon_tokenizer** out, char** error) {
  const std::string p = OrEmpty(path);
  if (p.empty()) {
    return Fail(absl::InvalidArgumentError("zephon_tokenizer_load: path is empty"), error);
  }
  if (absl::Status s = CheckLocalPath(p); !s.ok()) return Fail(s, error);
  absl::StatusOr<TokenizerOptions> opts = ToOptions(options);
  if (!opts.ok()) return Fail(opts.status(), error);
  absl::StatusOr<std::unique_ptr<Tokenizer>> tok = Tokenizer::Load(p, *opts);
  if (!tok.ok()) return Fail(NamingPath(tok.status(), p), error);
  return Loaded(std::move(tok), out, error);
}

int zephon_tokenizer_from_json(const char* json, uint64_t json_size, const char* config_json,
                               uint64_t config_size, const zephon_tokenizer_options* options,
                               zephon_tokenizer** out, char** error) {
  absl::StatusOr<TokenizerOptions> opts = ToOptions(options);
  if (!opts.ok()) return Fail(opts.status(), error);
  const std::string_view text =
      json == nullptr ? std::string_view() : std::string_view(json, json_size);
  const std::string_view config =
      config_json == nullptr ? std::string_view() : std::string_view(config_json, config_size);
  return Loaded(Tokenizer::FromJson(text, *opts, config), out, error);
}

void zephon_tokenizer_free(zephon_tokenizer* tokenizer) { delete tokenizer; }

int zephon_tokenizer_encode(const zephon_tokenizer* tokenizer, const char* text, uint64_t text_size,
                            const char* special_tokens, int32_t** ids, uint64_t* num_ids,
                            char** error) {
  if (absl::Status s = CheckHandle(tokenizer, "zephon_tokenizer_encode"); !s.ok()) {
    return Fail(s, error);
  }
  absl::StatusOr<SpecialTokens> mode =
      zephon::tokenizer::ParseSpecialTokens(OrEmpty(special_tokens));
  if (!mode.ok()) return Fail(mode.status(), error);
  std::vector<int32_t> out;
  const std::string_view t =
      text == nullptr ? std::string_view() : std::string_view(text, text_size);
  if (absl::Status s = tokenizer->tokenizer->Encode(t, *mode, &out); !s.ok()) return Fail(s, error);
  absl::StatusOr<int32_t*> copy = CopyOut(out);
  if (!copy.ok()) return Fail(copy.status(), error);
  *ids = *copy;
  *num_ids = out.size();
  return 0;
}

int zephon_tokenizer_encode_batch(const zephon_tokenizer* tokenizer, const char* const* texts,
                                  const uint64_t* sizes, uint64_t num_texts,
                                  const char* special_tokens, uint32_t num_threads, int32_t** ids,
                                  uint64_t** offsets, char** error) {
  if (absl::Status s = CheckHandle(tokenizer, "zephon_tokenizer_encode_batch"); !s.ok()) {
    return Fail(s, error);
  }
  absl::StatusOr<SpecialTokens> mode =
      zephon::tokenizer::ParseSpecialTokens(OrEmpty(special_tokens));
  if (!mode.ok()) return Fail(mode.status(), error);
  std::vector<std::string_view> views(num_texts);
  for (uint64_t i = 0; i < num_texts; ++i) {
    if (texts[i] != nullptr) views[i] = std::string_view(texts[i], sizes[i]);
  }
  absl::StatusOr<zephon::client::EncodedBatch> batch =
      zephon::client::EncodeBatch(*tokenizer->tokenizer, views, *mode, num_threads);
  if (!batch.ok()) return Fail(batch.status(), error);
  absl::StatusOr<int32_t*> id_copy = CopyOut(batch->ids);
  if (!id_copy.ok()) return Fail(id_copy.status(), error);
  absl::StatusOr<uint64_t*> offset_copy = CopyOut(batch->offsets);
  if (!offset_copy.ok()) {
    std::free(*id_copy);
    return Fail(offset_copy.status(), error);
  }
  *ids = *id_copy;
  *offsets = *offset_copy;
  return 0;
}

int zephon_tokenizer_decode(const zephon_tokenizer* tokenizer, const int32_t* ids, uint64_t num_ids,
                            char** text, uint64_t* text_size, char** error) {
  if (absl::Status s = CheckHandle(tokenizer, "zephon_tokenizer_decode"); !s.ok()) {
    return Fail(s, error);
  }
  absl::StatusOr<std::string> decoded =
      tokenizer->tokenizer->Decode(absl::Span<const int32_t>(ids, ids == nullptr ? 0 : num_ids));
  if (!decoded.ok()) return Fail(decoded.status(), error);
  *text = Dup(*decoded);
  if (*text == nullptr) return Fail(absl::ResourceExhaustedError("out of memory"), error);
  *text_size = decoded->size();
  return 0;
}

int32_t zephon_tokenizer_vocab_size(const zephon_tokenizer* tokenizer) {
  return tokenizer->tokenizer->vocab_size();
}

int32_t zephon_tokenizer_bos_token_id(const zephon_tokenizer* tokenizer) {
  return tokenizer->tokenizer->bos_token_id().value_or(-1);
}

int32_t zephon_tokenizer_eos_token_id(const zephon_tokenizer* tokenizer) {
  return tokenizer->tokenizer->eos_token_id().value_or(-1);
}

const char* zephon_tokenizer_fingerprint(const zephon_tokenizer* tokenizer) {
  return tokenizer->tokenizer->fingerprint().c_str();
}

void zephon_free_array(void* p) { std::free(p); }

}  // extern "C"
