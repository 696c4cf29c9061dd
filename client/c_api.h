/* The C ABI of the Zephon client: what the Python package (ctypes) and other languages
 * bind to. Python never touches ring atomics itself; it calls these functions.
 *
 * Conventions: functions return 0 on success, else an absl/gRPC status code (e.g. 3
 * INVALID_ARGUMENT, 9 FAILED_PRECONDITION, 11 OUT_OF_RANGE = end of data, 10 ABORTED,
 * 14 UNAVAILABLE, 4 DEADLINE_EXCEEDED) and set *error to a message the caller frees
 * with zephon_free. Strings returned through out-parameters are freed with zephon_free.
 * A zephon_reader is used by one thread at a time; blocking calls release no locks of
 * the caller (ctypes drops the GIL around them). A reader belongs to the process that
 * attached it: in a forked child every call fails with FAILED_PRECONDITION, so a child
 * never inherits its parent's loans.
 *
 * Versioning: ZEPHON_C_API_VERSION is bumped whenever a function, a struct layout or a
 * meaning here changes; a binding compares it with zephon_c_api_version() when it loads
 * the library and refuses a mismatch (the Python package does, naming both). A struct
 * the caller passes in starts with struct_size, which the caller sets to
 * sizeof(struct) as its header declares it: the library refuses another size (a
 * caller built against an older or newer c_api.h) instead of reading or writing past
 * the caller's memory. Should a later version append fields, it will accept the older
 * size and fill only that prefix. */
#ifndef ZEPHON_CLIENT_C_API_H_
#define ZEPHON_CLIENT_C_API_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Version 1: the first versioned ABI (struct_size in zephon_batch).
 * Version 2: adds zephon_released; zephon_delivered becomes its deprecated alias. No
 * struct layout changed: a caller built against version 1 links and runs unchanged.
 * Version 3: adds the tokenizer (zephon_tokenizer_*, zephon_tokenizer_options,
 * zephon_free_array). Nothing older changed.
 * Version 4: adds zephon_checkpoint_noted (the round's warning) and
 * zephon_inspect_checkpoint. Nothing older changed.
 * Version 5: adds zephon_warm_up. Nothing older changed. */
#define ZEPHON_C_API_VERSION 5

#define ZEPHON_MAX_TENSORS 8

typedef struct zephon_reader zephon_reader;

/* Part of zephon_batch: its size is covered by the batch's struct_size. */
typedef struct {
  char name[24];
  int32_t dtype; /* shm::DType code */
  int32_t ndim;
  uint64_t shape[4];
  const void* data;
  uint64_t nbytes;
} zephon_tensor;

typedef struct {
  uint32_t struct_size; /* set by the caller: sizeof(zephon_batch) */
  uint32_t num_tensors;
  uint64_t seq;
  uint64_t lane_batch_index;
  uint32_t lane;
  uint32_t flags;
  zephon_tensor tensors[ZEPHON_MAX_TENSORS];
} zephon_batch;

/* Connects to the daemon at socket_path (NULL/"" = default), starting zephond_path if
 * none answers (NULL/"" = never start one), and attaches one rank described by
 * request_json (an AttachRequest in proto JSON). On success *reply_json is the
 * AttachReply in JSON. */
int zephon_attach(const char* socket_path, const char* zephond_path, const char* request_json,
                  double timeout_s, zephon_reader** out, char** reply_json, char** error);
/* Loans the next batch into *out (whose struct_size the caller set); valid until
 * zephon_release(seq). 11 = end of data; 3 = out->struct_size smaller than this
 * library's zephon_batch, 9 = larger (see Versioning above). */
int zephon_next(zephon_reader* reader, double timeout_s, zephon_batch* out, char** error);
int zephon_release(zephon_reader* reader, uint64_t seq, char** error);
/* Batches this reader has released: every seq below the count was released (a batch
 * still on loan, or released ahead of an older loan, does not count yet). */
uint64_t zephon_released(zephon_reader* reader);
/* Deprecated alias of zephon_released (same value), kept for callers written against
 * version 1; use zephon_released. */
uint64_t zephon_delivered(zephon_reader* reader);
/* The reader's whole ring mapping. Tensor data pointers of every batch lie inside it, so
 * a binding can wrap it once and slice tensors by offset. Valid until zephon_detach. */
void zephon_ring_region(zephon_reader* reader, const void** base, uint64_t* bytes);
/* Ends the rank's lease with the daemon (a clean detach) but keeps the ring mapped, so
 * pointers into loaned batches never fault before zephon_detach. Their contents are no
 * longer protected, though: once the lease ends the producer may reuse those slots for
 * other batches, so copy or release what you need first. Further zephon_next calls
 * fail with FAILED_PRECONDITION. Idempotent. */
void zephon_end_lease(zephon_reader* reader);
/* Detaches (if still attached), unmaps and frees the reader. NULL is ignored. */
void zephon_detach(zephon_reader* reader);

/* Collective checkpoint (see AttachedReader::Checkpoint). On success *data and *size hold
 * the merged checkpoint bytes (free *data with zephon_free). To restore, put them
 * base64-encoded in the attach request's "restore_checkpoint". */
int zephon_checkpoint(zephon_reader* reader, double timeout_s, char** data, uint64_t* size,
                      char** error);
/* zephon_checkpoint, plus the leader's warning about the round: *warning is NULL, or a
 * message to show the user (free it with zephon_free), e.g. a checkpoint taken
 * mid-window (lanes at unequal batch counts); the leader sends it once per run.
 * `warning` may be NULL: the warning is then not returned. */
int zephon_checkpoint_noted(zephon_reader* reader, double timeout_s, char** data,
                            uint64_t* size, char** warning, char** error);

/* Decodes merged checkpoint bytes (from zephon_checkpoint) offline, with the checks a
 * restore makes (magic, format version, length, CRC-32): *json is the CheckpointState
 * (proto/checkpoint.proto) as JSON with proto field names. INVALID_ARGUMENT for bytes
 * that are not a Zephon checkpoint, DATA_LOSS for a damaged one, FAILED_PRECONDITION
 * for a newer format. Needs no daemon. */
int zephon_inspect_checkpoint(const char* data, uint64_t size, char** json, char** error);

/* Daemon queries: Explain text and Status as JSON. */
int zephon_explain(const char* socket_path, const char* instance_id, double timeout_s,
                   char** text, char** error);
int zephon_status(const char* socket_path, double timeout_s, char** json, char** error);

/* ---- Tokenizer: the tokenizer library the daemon's tokenize stage uses (tokenizer/
 * tokenizer.h), for users to check their setup and for tests. No daemon involved.
 * A zephon_tokenizer is immutable once loaded and thread-safe: any number of threads may
 * encode and decode with one handle at once (ctypes drops the GIL around each call).
 * special_tokens (encode) is one of "none", "bos", "eos", "bos_eos", "tokenizer_default";
 * another name fails with 3 INVALID_ARGUMENT listing them. Arrays the library returns
 * (ids, offsets) are malloc'ed and freed with zephon_free_array; text with zephon_free. */

typedef struct zephon_tokenizer zephon_tokenizer;

/* Load options; a NULL options pointer means all defaults. */
typedef struct {
  uint32_t struct_size;          /* set by the caller: sizeof(zephon_tokenizer_options) */
  uint32_t split_special_tokens; /* nonzero: special added tokens in text are plain text */
  int32_t bos_token_id;          /* >= 0 overrides the tokenizer's BOS; -1 keeps it */
  int32_t eos_token_id;          /* >= 0 overrides the tokenizer's EOS; -1 keeps it */
} zephon_tokenizer_options;

/* From a local path: a tokenizer.json, an HF model directory holding one (with its
 * tokenizer_config.json for BOS/EOS), or a SentencePiece .model (read through
 * libzephon_spm_shim.so, which must sit next to this library or be named by
 * $ZEPHON_SPM_SHIM). Errors name the path: 5 NOT_FOUND (no such file, or a directory
 * without tokenizer.json); 3 INVALID_ARGUMENT for a malformed or unsupported tokenizer
 * (naming the JSON path of the component), a URL such as s3:// (this library reads local
 * files only: download it first), or a struct_size other than
 * sizeof(zephon_tokenizer_options); 9 FAILED_PRECONDITION for a .model when the shim
 * cannot be found or loaded (the message names the paths tried). */
int zephon_tokenizer_load(const char* path, const zephon_tokenizer_options* options,
                          zephon_tokenizer** out, char** error);
/* From the bytes of a tokenizer.json (e.g. tokenizers.Tokenizer.to_str()); config_json
 * (config_size bytes, NULL/0 = none) is an optional tokenizer_config.json naming
 * bos_token / eos_token. Errors as zephon_tokenizer_load's. */
int zephon_tokenizer_from_json(const char* json, uint64_t json_size, const char* config_json,
                               uint64_t config_size, const zephon_tokenizer_options* options,
                               zephon_tokenizer** out, char** error);
/* Frees the tokenizer. NULL is ignored. No call on it may be in flight. */
void zephon_tokenizer_free(zephon_tokenizer* tokenizer);

/* The ids of text (text_size bytes; invalid UTF-8 is replaced by U+FFFD first) into
 * *ids (*num_ids entries; *ids is NULL when there are none). Errors: 3 (special_tokens),
 * 9 FAILED_PRECONDITION when it needs a BOS/EOS the tokenizer does not define. */
int zephon_tokenizer_encode(const zephon_tokenizer* tokenizer, const char* text,
                            uint64_t text_size, const char* special_tokens, int32_t** ids,
                            uint64_t* num_ids, char** error);
/* Encodes num_texts documents (texts[i] of sizes[i] bytes) on up to num_threads threads
 * (0 = one per hardware thread); the ids do not depend on num_threads. On success *ids
 * holds all ids, document i at [(*offsets)[i], (*offsets)[i + 1]), and *offsets has
 * num_texts + 1 entries. Errors as zephon_tokenizer_encode's, naming the document. */
int zephon_tokenizer_encode_batch(const zephon_tokenizer* tokenizer, const char* const* texts,
                                  const uint64_t* sizes, uint64_t num_texts,
                                  const char* special_tokens, uint32_t num_threads,
                                  int32_t** ids, uint64_t** offsets, char** error);
/* The text of ids (special tokens included) into *text (*text_size bytes plus a NUL;
 * free it with zephon_free). Errors: 11 OUT_OF_RANGE naming an id not in the vocabulary. */
int zephon_tokenizer_decode(const zephon_tokenizer* tokenizer, const int32_t* ids,
                            uint64_t num_ids, char** text, uint64_t* text_size, char** error);
/* One past the largest id the tokenizer produces (added tokens included). */
int32_t zephon_tokenizer_vocab_size(const zephon_tokenizer* tokenizer);
/* BOS / EOS id, or -1 when the tokenizer defines none (and no option named one). */
int32_t zephon_tokenizer_bos_token_id(const zephon_tokenizer* tokenizer);
int32_t zephon_tokenizer_eos_token_id(const zephon_tokenizer* tokenizer);
/* "sha256:<hex>" of the canonical tokenizer plus the options that change ids (see
 * Tokenizer::fingerprint). Owned by the tokenizer: valid until zephon_tokenizer_free. */
const char* zephon_tokenizer_fingerprint(const zephon_tokenizer* tokenizer);
/* Frees an array the library returned (ids, offsets). NULL is ignored. */
void zephon_free_array(void* p);

/* Pays the library's one-time process setup (gRPC's initialization and core
 * configuration, protobuf's JSON type resolver) without connecting anywhere, so that the
 * first attach does not: call it early, e.g. from a background thread at start-up. It
 * leaves no thread behind. Thread-safe; harmless to call again. */
void zephon_warm_up(void);
/* The C API version this library was built with (its ZEPHON_C_API_VERSION). */
uint32_t zephon_c_api_version(void);
/* The ring ABI major version this library speaks. */
uint32_t zephon_ring_abi_major(void);
void zephon_free(char* p);

#ifdef __cplusplus
}
#endif

#endif /* ZEPHON_CLIENT_C_API_H_ */
