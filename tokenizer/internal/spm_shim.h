// The C interface of libzephon_spm_shim.so, the only code that links Debian's
// libsentencepiece. spm_processor.cc loads the shim with dlmopen(LM_ID_NEWLM) so
// libsentencepiece's embedded protobuf 3.14 (and its own libstdc++ and libc) resolve in a
// separate link namespace and never meet the protobuf 3.21 that gRPC loads (see
// docs/design.md, "Tokenizer").
//
// Only C types cross the boundary. The two namespaces have separate heaps, so the shim never
// returns memory for the caller to free: results and errors go to a caller-supplied sink,
// called synchronously before the function returns.
//
// Thread-safety: a model handle is thread-safe for zspm_encode, zspm_decode and the id
// accessors (libsentencepiece's Encode and Decode are const); zspm_free requires that no
// other call on the handle is in flight.
#ifndef ZEPHON_TOKENIZER_INTERNAL_SPM_SHIM_H_
#define ZEPHON_TOKENIZER_INTERNAL_SPM_SHIM_H_

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

// Incremented on any change of the functions below; spm_processor.cc refuses another value.
#define ZSPM_ABI_VERSION 1

typedef struct zspm_model zspm_model;
// Receives `size` bytes (ids: `size` ints) at `data`, valid only during the call.
typedef void (*zspm_bytes_sink)(void* context, const char* data, size_t size);
typedef void (*zspm_ids_sink)(void* context, const int* ids, size_t size);

int zspm_abi_version(void);
// A model parsed from the bytes of a .model file, or NULL with the reason sent to `error`.
zspm_model* zspm_load(const char* bytes, size_t size, zspm_bytes_sink error, void* context);
void zspm_free(zspm_model* model);
int zspm_piece_size(const zspm_model* model);
int zspm_bos_id(const zspm_model* model);  // -1 when the model has none
int zspm_eos_id(const zspm_model* model);
// 0 with the ids sent to `out`, or -1 with the reason sent to `error`.
int zspm_encode(const zspm_model* model, const char* text, size_t size, zspm_ids_sink out,
                zspm_bytes_sink error, void* context);
// 0 with the text sent to `out`, or -1 with the reason sent to `error`.
int zspm_decode(const zspm_model* model, const int* ids, size_t size, zspm_bytes_sink out,
                zspm_bytes_sink error, void* context);

#ifdef __cplusplus
}  // extern "C"
#endif

#endif  // ZEPHON_TOKENIZER_INTERNAL_SPM_SHIM_H_
