"""zephon.Tokenizer: the daemon's tokenizer (C++, tokenizer/tokenizer.h) in Python, through
the C ABI (client/c_api.h, "Tokenizer"). For checking a setup (do these ids match what my
training code expects?) and for tests; Pipeline.tokenize runs the same code in zephond.

    tok = zephon.Tokenizer("models/llama3/tokenizer.json")   # or an HF model directory
    ids = tok.encode("Hello world", special_tokens="bos")
    text = tok.decode(ids)
"""
from __future__ import annotations

import array
import ctypes
import json
import os
from typing import Any, Iterable, NoReturn, Optional, Protocol, Union

from . import _native, errors

# The accepted special_tokens names (the library checks them; listed here for docs).
SPECIAL_TOKENS = ("none", "bos", "eos", "bos_eos", "tokenizer_default")


class _SupportsToStr(Protocol):
    """A `tokenizers` Tokenizer: ``to_str()`` gives its tokenizer.json text."""

    def to_str(self) -> Union[str, bytes]: ...


class _HasBackendTokenizer(Protocol):
    """A `transformers` fast tokenizer: ``backend_tokenizer.to_str()``."""

    @property
    def backend_tokenizer(self) -> _SupportsToStr: ...


# What zephon.Tokenizer (and Pipeline.tokenize) load: a local path, or an object holding
# tokenizer.json text.
_TokenizerSource = Union[str, "os.PathLike[str]", "os.PathLike[bytes]", _SupportsToStr,
                         _HasBackendTokenizer]


def _raise(code: int, error: ctypes.c_void_p) -> NoReturn:
    message = _native.take_string(error)
    # Bad arguments of a local call (a special_tokens name, an id outside the vocabulary,
    # a BOS/EOS the tokenizer lacks) are ValueErrors; the rest maps as everywhere.
    if code in (errors.INVALID_ARGUMENT, errors.FAILED_PRECONDITION, errors.OUT_OF_RANGE):
        raise errors.InvalidOptionError(message, code)
    raise errors.from_code(code, message)


def _text_bytes(text: object) -> bytes:
    if isinstance(text, bytes):
        return text
    if isinstance(text, str):
        # Lone surrogates pass through as invalid UTF-8, which the library replaces by
        # U+FFFD, as it does for any invalid UTF-8.
        return text.encode("utf-8", "surrogatepass")
    raise TypeError(f"text must be str or bytes, not {type(text).__name__}")


def _ids_from(ptr: Any, n: int) -> list[int]:
    if n == 0:
        return []
    out = array.array("i")
    out.frombytes(ctypes.string_at(ptr, n * 4))
    return out.tolist()


def _tokenizer_json_of(obj: Any) -> tuple[bytes, bytes | None]:
    """(tokenizer.json bytes, tokenizer_config-style JSON or None) of a `tokenizers`
    Tokenizer (to_str()) or a `transformers` fast tokenizer (backend_tokenizer.to_str(),
    and its bos_token / eos_token)."""
    if hasattr(obj, "to_str"):
        source = obj
    elif hasattr(getattr(obj, "backend_tokenizer", None), "to_str"):
        source = obj.backend_tokenizer
    else:
        raise TypeError(
            f"zephon.Tokenizer takes a path (str or os.PathLike) or an object with to_str() or "
            f"backend_tokenizer.to_str() (a tokenizers or transformers fast tokenizer), not "
            f"{type(obj).__name__}")
    text = source.to_str()
    if not isinstance(text, (str, bytes)):
        raise TypeError(f"{type(source).__name__}.to_str() returned {type(text).__name__}, "
                        "not the tokenizer.json text")
    config = {k: getattr(obj, k) for k in ("bos_token", "eos_token")
              if isinstance(getattr(obj, k, None), str)}
    data = text.encode("utf-8") if isinstance(text, str) else text
    return data, (json.dumps(config).encode("utf-8") if config else None)


class Tokenizer:
    """A tokenizer loaded once and immutable afterwards; safe to share across threads
    (the GIL is released while the library encodes).

    path_or_object: a local tokenizer.json, an HF model directory holding one (its
    tokenizer_config.json names BOS/EOS) or a SentencePiece .model file; or an object
    with to_str() / backend_tokenizer.to_str() (a `tokenizers` / `transformers`
    tokenizer), whose JSON is passed as bytes. s3:// and other URLs are refused: download
    first. .model files are read through _native/libzephon_spm_shim.so (`make build`
    installs it; $ZEPHON_SPM_SHIM overrides the path); without it loading one raises
    SpecMismatchError (code 9) naming the paths tried.
    split_special_tokens: special added tokens in text are encoded as plain text.
    bos_token_id / eos_token_id: override the BOS/EOS the tokenizer names.

    Raises NotFoundError (a FileNotFoundError) for a missing path, InvalidOptionError (a
    ValueError) for a malformed or unsupported tokenizer (the message names the file and
    the JSON path of the component), TypeError for anything else passed in.
    """

    def __init__(self, path_or_object: _TokenizerSource, *, split_special_tokens: bool = False,
                 bos_token_id: int | None = None, eos_token_id: int | None = None) -> None:
        self._handle: Optional[ctypes.c_void_p] = None
        # What Pipeline.tokenize sends zephond for this tokenizer: its options, and its
        # source (an absolute path, or the JSON bytes of an object).
        self._options = {"split_special_tokens": bool(split_special_tokens),
                         "bos_token_id": bos_token_id, "eos_token_id": eos_token_id}
        options = _native.TokenizerOptions()
        options.split_special_tokens = 1 if split_special_tokens else 0
        for name, value in (("bos_token_id", bos_token_id), ("eos_token_id", eos_token_id)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 0):
                raise errors.InvalidOptionError(
                    f"{name} must be a token id (an int >= 0) or None, not {value!r}",
                    errors.INVALID_ARGUMENT)
            setattr(options, name, -1 if value is None else value)
        handle = ctypes.c_void_p()
        error = ctypes.c_void_p()
        if isinstance(path_or_object, (str, os.PathLike)):
            path = os.fspath(path_or_object)
            if isinstance(path, bytes):
                path = os.fsdecode(path)
            if path.startswith("s3:/"):  # pathlib turns "s3://b/k" into "s3:/b/k"
                raise errors.InvalidOptionError(
                    f"tokenizer {path!r}: zephon.Tokenizer reads local paths only, not s3:// "
                    f"URLs; download the tokenizer first (e.g. `aws s3 cp --recursive "
                    f"s3://bucket/model ./model`) and pass the local file or directory",
                    errors.INVALID_ARGUMENT)
            code = _native.LIB.zephon_tokenizer_load(os.fsencode(path), ctypes.byref(options),
                                                     ctypes.byref(handle), ctypes.byref(error))
            self._source = path
            self._spec_source: dict[str, Any] = {"tokenizer_path": os.path.abspath(path)}
        else:
            data, config = _tokenizer_json_of(path_or_object)
            code = _native.LIB.zephon_tokenizer_from_json(
                data, len(data), config, len(config) if config else 0, ctypes.byref(options),
                ctypes.byref(handle), ctypes.byref(error))
            self._source = f"{type(path_or_object).__name__}.to_str()"
            self._spec_source = {"tokenizer_json": data, "tokenizer_config_json": config}
        if code != 0:
            _raise(code, error)
        self._handle = handle

    def __del__(self) -> None:
        handle, self._handle = getattr(self, "_handle", None), None
        if handle is not None and _native is not None and _native.LIB is not None:
            _native.LIB.zephon_tokenizer_free(handle)

    def encode(self, text: str | bytes, special_tokens: str = "none") -> list[int]:
        """The ids of `text` (str, or bytes holding UTF-8; invalid UTF-8 becomes U+FFFD).
        special_tokens: "none" (the text's tokens only), "bos", "eos", "bos_eos", or
        "tokenizer_default" (what HF's add_special_tokens=True adds). Raises
        InvalidOptionError (a ValueError) for another name, listing the valid ones, or when
        the mode needs a BOS/EOS the tokenizer lacks."""
        data = _text_bytes(text)
        ids = ctypes.POINTER(ctypes.c_int32)()
        n = ctypes.c_uint64()
        error = ctypes.c_void_p()
        code = _native.LIB.zephon_tokenizer_encode(
            self._handle, data, len(data), _native.encode(special_tokens), ctypes.byref(ids),
            ctypes.byref(n), ctypes.byref(error))
        if code != 0:
            _raise(code, error)
        try:
            return _ids_from(ids, n.value)
        finally:
            _native.LIB.zephon_free_array(ids)

    def encode_batch(self, texts: Iterable[str | bytes], special_tokens: str = "none",
                     num_threads: int = 1) -> list[list[int]]:
        """encode() of every text, in input order, on up to num_threads threads (0 = one
        per hardware thread). The ids do not depend on num_threads. Errors as encode's;
        a failing document is named by its index."""
        if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 0:
            raise errors.InvalidOptionError(
                f"num_threads must be an int >= 0 (0 = one per hardware thread), not "
                f"{num_threads!r}", errors.INVALID_ARGUMENT)
        if isinstance(texts, (str, bytes)):
            raise TypeError("encode_batch takes a list of texts; use encode for one text")
        data = [_text_bytes(t) for t in texts]
        n = len(data)
        c_texts = (ctypes.c_char_p * n)(*data)
        sizes = (ctypes.c_uint64 * n)(*(len(d) for d in data))
        ids = ctypes.POINTER(ctypes.c_int32)()
        offsets = ctypes.POINTER(ctypes.c_uint64)()
        error = ctypes.c_void_p()
        code = _native.LIB.zephon_tokenizer_encode_batch(
            self._handle, c_texts, sizes, n, _native.encode(special_tokens), num_threads,
            ctypes.byref(ids), ctypes.byref(offsets), ctypes.byref(error))
        if code != 0:
            _raise(code, error)
        try:
            bounds = array.array("Q")
            bounds.frombytes(ctypes.string_at(offsets, (n + 1) * 8))
            flat = _ids_from(ids, bounds[n])
            return [flat[bounds[i]:bounds[i + 1]] for i in range(n)]
        finally:
            _native.LIB.zephon_free_array(ids)
            _native.LIB.zephon_free_array(offsets)

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids` (special tokens included), as HF tokenizers decodes it with
        skip_special_tokens=False. Raises InvalidOptionError (a ValueError) naming an id
        outside the vocabulary."""
        ids = list(ids)
        for i in ids:
            if isinstance(i, bool) or not isinstance(i, int) or not -2**31 <= i < 2**31:
                raise errors.InvalidOptionError(f"decode: {i!r} is not a token id",
                                                errors.INVALID_ARGUMENT)
        c_ids = (ctypes.c_int32 * len(ids))(*ids)
        text = ctypes.c_void_p()
        size = ctypes.c_uint64()
        error = ctypes.c_void_p()
        code = _native.LIB.zephon_tokenizer_decode(self._handle, c_ids, len(ids),
                                                   ctypes.byref(text), ctypes.byref(size),
                                                   ctypes.byref(error))
        if code != 0:
            _raise(code, error)
        try:
            return ctypes.string_at(text, size.value).decode("utf-8", "replace")
        finally:
            _native.LIB.zephon_free(text)

    @property
    def vocab_size(self) -> int:
        """One past the largest id the tokenizer produces (added tokens included)."""
        return int(_native.LIB.zephon_tokenizer_vocab_size(self._handle))

    @property
    def bos_token_id(self) -> int | None:
        """The BOS id (the option, else tokenizer_config.json, the post-processor's template
        or a well-known name), or None."""
        value = int(_native.LIB.zephon_tokenizer_bos_token_id(self._handle))
        return None if value < 0 else value

    @property
    def eos_token_id(self) -> int | None:
        """The EOS id, found as bos_token_id's, or None."""
        value = int(_native.LIB.zephon_tokenizer_eos_token_id(self._handle))
        return None if value < 0 else value

    @property
    def fingerprint(self) -> str:
        """"sha256:<hex>" of the canonical tokenizer and the options that change ids: equal
        fingerprints mean equal ids for every text (it keys the daemon's token cache)."""
        fingerprint: bytes = _native.LIB.zephon_tokenizer_fingerprint(self._handle)
        return fingerprint.decode("ascii")

    def __repr__(self) -> str:
        return (f"zephon.Tokenizer({self._source!r}, vocab_size={self.vocab_size}, "
                f"fingerprint={self.fingerprint!r})")
