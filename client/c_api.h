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
 * struct layout changed: a caller built against version 1 links and runs unchanged. */
#define ZEPHON_C_API_VERSION 2

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

/* Daemon queries: Explain text and Status as JSON. */
int zephon_explain(const char* socket_path, const char* instance_id, double timeout_s,
                   char** text, char** error);
int zephon_status(const char* socket_path, double timeout_s, char** json, char** error);

/* The C API version this library was built with (its ZEPHON_C_API_VERSION). */
uint32_t zephon_c_api_version(void);
/* The ring ABI major version this library speaks. */
uint32_t zephon_ring_abi_major(void);
void zephon_free(char* p);

#ifdef __cplusplus
}
#endif

#endif /* ZEPHON_CLIENT_C_API_H_ */
