"""ctypes binding of the Zephon C ABI (client/c_api.h).

Python never touches ring atomics: every ring operation is a call into the C++ client
library. ctypes releases the GIL for the duration of each call, so a rank blocked
waiting for its next batch does not stall other Python threads.

The structs below mirror c_api.h field by field, and C_API_VERSION its
ZEPHON_C_API_VERSION; loading refuses a library of another version (see _load), and
tests/e2e/test_c_abi.py checks the mirrors against the header's layout.
"""
from __future__ import annotations

import atexit
import ctypes
import os
import threading
from pathlib import Path
from typing import Any, Iterable, Optional, Union

_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parents[2]  # client/python/zephon -> repo root (in a checkout)

# The ZEPHON_C_API_VERSION of the c_api.h these bindings mirror.
C_API_VERSION = 5
MAX_TENSORS = 8


class Tensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char * 24),
        ("dtype", ctypes.c_int32),
        ("ndim", ctypes.c_int32),
        ("shape", ctypes.c_uint64 * 4),
        ("data", ctypes.c_void_p),
        ("nbytes", ctypes.c_uint64),
    ]


class BatchInfo(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("num_tensors", ctypes.c_uint32),
        ("seq", ctypes.c_uint64),
        ("lane_batch_index", ctypes.c_uint64),
        ("lane", ctypes.c_uint32),
        ("flags", ctypes.c_uint32),
        ("tensors", Tensor * MAX_TENSORS),
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.struct_size = ctypes.sizeof(BatchInfo)  # the library checks it (c_api.h)


class TokenizerOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("split_special_tokens", ctypes.c_uint32),
        ("bos_token_id", ctypes.c_int32),
        ("eos_token_id", ctypes.c_int32),
    ]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.struct_size = ctypes.sizeof(TokenizerOptions)  # the library checks it


# Every struct of c_api.h and its mirror here (the layout test walks this).
C_STRUCTS = {"zephon_tensor": Tensor, "zephon_batch": BatchInfo,
             "zephon_tokenizer_options": TokenizerOptions}


def _first_existing(candidates: Iterable[Union[str, Path, None]]) -> Optional[str]:
    for c in candidates:
        if c and Path(c).is_file():
            return str(c)
    return None


def library_path() -> str:
    found = _first_existing([
        os.environ.get("ZEPHON_LIB"),
        _HERE / "_native" / "libzephon_c.so",
        _REPO / "bazel-bin" / "client" / "libzephon_c.so",
    ])
    if found is None:
        raise ImportError(
            "zephon: the native client library libzephon_c.so was not found; run `make build` "
            "in the Zephon checkout, or set ZEPHON_LIB to its path")
    return found


def zephond_path() -> str | None:
    """The zephond binary a client may auto-start, or None."""
    return _first_existing([
        os.environ.get("ZEPHOND"),
        _HERE / "_native" / "zephond",
        _REPO / "bazel-bin" / "daemon" / "zephond",
    ])


def _check_version(lib: ctypes.CDLL, path: str, expected: int) -> None:
    """Refuses a library built from another c_api.h than these bindings mirror: its
    structs and functions may differ, and a mismatch would corrupt memory, not fail."""
    fix = ("rebuild it (`make build` in the Zephon checkout) or reinstall the zephon package, "
           "so that the library and the Python package come from the same build; ZEPHON_LIB "
           "overrides which library is loaded")
    try:
        version_fn = lib.zephon_c_api_version
    except AttributeError:
        raise ImportError(
            f"zephon: the native library {path} has no zephon_c_api_version(): it predates C "
            f"API versioning, but this zephon Python package needs C API version {expected}; "
            f"{fix}") from None
    version_fn.argtypes = []
    version_fn.restype = ctypes.c_uint32
    got = int(version_fn())
    if got != expected:
        raise ImportError(
            f"zephon: the native library {path} speaks C API version {got}, but this zephon "
            f"Python package needs C API version {expected}; {fix}")


def _declare_tokenizer(lib: ctypes.CDLL) -> None:
    """The zephon_tokenizer_* functions (c_api.h, "Tokenizer"); handles are c_void_p."""
    P = ctypes.POINTER
    void_pp = P(ctypes.c_void_p)
    lib.zephon_tokenizer_load.argtypes = [ctypes.c_char_p, P(TokenizerOptions), void_pp, void_pp]
    lib.zephon_tokenizer_load.restype = ctypes.c_int
    lib.zephon_tokenizer_from_json.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_char_p,
                                               ctypes.c_uint64, P(TokenizerOptions), void_pp,
                                               void_pp]
    lib.zephon_tokenizer_from_json.restype = ctypes.c_int
    lib.zephon_tokenizer_free.argtypes = [ctypes.c_void_p]
    lib.zephon_tokenizer_free.restype = None
    lib.zephon_tokenizer_encode.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint64,
                                            ctypes.c_char_p, P(P(ctypes.c_int32)),
                                            P(ctypes.c_uint64), void_pp]
    lib.zephon_tokenizer_encode.restype = ctypes.c_int
    lib.zephon_tokenizer_encode_batch.argtypes = [
        ctypes.c_void_p, P(ctypes.c_char_p), P(ctypes.c_uint64), ctypes.c_uint64,
        ctypes.c_char_p, ctypes.c_uint32, P(P(ctypes.c_int32)), P(P(ctypes.c_uint64)), void_pp]
    lib.zephon_tokenizer_encode_batch.restype = ctypes.c_int
    lib.zephon_tokenizer_decode.argtypes = [ctypes.c_void_p, P(ctypes.c_int32), ctypes.c_uint64,
                                            void_pp, P(ctypes.c_uint64), void_pp]
    lib.zephon_tokenizer_decode.restype = ctypes.c_int
    for name in ("vocab_size", "bos_token_id", "eos_token_id"):
        fn = getattr(lib, f"zephon_tokenizer_{name}")
        fn.argtypes = [ctypes.c_void_p]
        fn.restype = ctypes.c_int32
    lib.zephon_tokenizer_fingerprint.argtypes = [ctypes.c_void_p]
    lib.zephon_tokenizer_fingerprint.restype = ctypes.c_char_p
    lib.zephon_free_array.argtypes = [ctypes.c_void_p]
    lib.zephon_free_array.restype = None


def _load() -> ctypes.CDLL:
    path = library_path()
    lib = ctypes.CDLL(path)
    _check_version(lib, path, C_API_VERSION)
    lib.zephon_attach.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                                  ctypes.c_double, ctypes.POINTER(ctypes.c_void_p),
                                  ctypes.POINTER(ctypes.c_void_p),
                                  ctypes.POINTER(ctypes.c_void_p)]
    lib.zephon_attach.restype = ctypes.c_int
    lib.zephon_next.argtypes = [ctypes.c_void_p, ctypes.c_double, ctypes.POINTER(BatchInfo),
                                ctypes.POINTER(ctypes.c_void_p)]
    lib.zephon_next.restype = ctypes.c_int
    lib.zephon_release.argtypes = [ctypes.c_void_p, ctypes.c_uint64,
                                   ctypes.POINTER(ctypes.c_void_p)]
    lib.zephon_release.restype = ctypes.c_int
    lib.zephon_ring_region.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p),
                                       ctypes.POINTER(ctypes.c_uint64)]
    lib.zephon_ring_region.restype = None
    lib.zephon_released.argtypes = [ctypes.c_void_p]
    lib.zephon_released.restype = ctypes.c_uint64
    lib.zephon_delivered.argtypes = [ctypes.c_void_p]  # deprecated alias of zephon_released
    lib.zephon_delivered.restype = ctypes.c_uint64
    lib.zephon_end_lease.argtypes = [ctypes.c_void_p]
    lib.zephon_end_lease.restype = None
    lib.zephon_detach.argtypes = [ctypes.c_void_p]
    lib.zephon_detach.restype = None
    lib.zephon_checkpoint.argtypes = [ctypes.c_void_p, ctypes.c_double,
                                      ctypes.POINTER(ctypes.c_void_p),
                                      ctypes.POINTER(ctypes.c_uint64),
                                      ctypes.POINTER(ctypes.c_void_p)]
    lib.zephon_checkpoint.restype = ctypes.c_int
    lib.zephon_checkpoint_noted.argtypes = [ctypes.c_void_p, ctypes.c_double,
                                            ctypes.POINTER(ctypes.c_void_p),
                                            ctypes.POINTER(ctypes.c_uint64),
                                            ctypes.POINTER(ctypes.c_void_p),
                                            ctypes.POINTER(ctypes.c_void_p)]
    lib.zephon_checkpoint_noted.restype = ctypes.c_int
    lib.zephon_inspect_checkpoint.argtypes = [ctypes.c_char_p, ctypes.c_uint64,
                                              ctypes.POINTER(ctypes.c_void_p),
                                              ctypes.POINTER(ctypes.c_void_p)]
    lib.zephon_inspect_checkpoint.restype = ctypes.c_int
    lib.zephon_explain.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_double,
                                   ctypes.POINTER(ctypes.c_void_p),
                                   ctypes.POINTER(ctypes.c_void_p)]
    lib.zephon_explain.restype = ctypes.c_int
    lib.zephon_status.argtypes = [ctypes.c_char_p, ctypes.c_double,
                                  ctypes.POINTER(ctypes.c_void_p),
                                  ctypes.POINTER(ctypes.c_void_p)]
    lib.zephon_status.restype = ctypes.c_int
    _declare_tokenizer(lib)
    lib.zephon_ring_abi_major.restype = ctypes.c_uint32
    lib.zephon_warm_up.argtypes = []
    lib.zephon_warm_up.restype = None
    lib.zephon_free.argtypes = [ctypes.c_void_p]
    lib.zephon_free.restype = None
    return lib


LIB = _load()


def _start_warm_up() -> None:
    """Runs zephon_warm_up() on a thread of its own, so that gRPC's and protobuf's
    one-time setup (~5 ms on 2 cores) overlaps the trainer's own start-up instead of
    delaying its first attach. The C call leaves no gRPC thread behind, but a fork in the
    middle of it would copy gRPC half-initialized into the child: every fork made through
    Python (os.fork, multiprocessing, a DataLoader's workers) first waits for it. A fork
    made from C bypasses that wait: set ZEPHON_WARM_UP=0 where that can happen."""
    if os.environ.get("ZEPHON_WARM_UP", "1") == "0":
        return
    thread = threading.Thread(target=LIB.zephon_warm_up, name="zephon-warm-up", daemon=True)
    thread.start()

    def wait_for_warm_up() -> None:
        if thread.ident != threading.get_ident():
            thread.join()

    os.register_at_fork(before=wait_for_warm_up)
    atexit.register(wait_for_warm_up)


_start_warm_up()


def take_string(ptr: ctypes.c_void_p) -> str:
    """Copies a malloc'ed C string into Python and frees it."""
    if not ptr.value:
        return ""
    try:
        return ctypes.string_at(ptr.value).decode("utf-8", "replace")
    finally:
        LIB.zephon_free(ptr)


def encode(s: str | None) -> bytes | None:
    return None if s is None else s.encode("utf-8")
