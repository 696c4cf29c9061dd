"""Writing Megatron indexed datasets (.bin + .idx) from token lists.

Used by the demo and tests to make corpora with project code. The format: the .idx file
starts with the magic b"MMIDIDX\\x00\\x00", u64 version 1, u8 dtype code, u64 sequence
count N, u64 document count M, then int32 sizes[N], int64 byte pointers[N] and int64
doc_idx[M]; the .bin file holds the tokens back to back.
"""
from __future__ import annotations

import os
import struct
from typing import Iterable

import numpy as np
import numpy.typing as npt

_DTYPE_CODES = {np.dtype(np.uint8): 1, np.dtype(np.int8): 2, np.dtype(np.int16): 3,
                np.dtype(np.int32): 4, np.dtype(np.int64): 5, np.dtype(np.uint16): 8}


def write_megatron_dataset(prefix: str | os.PathLike[str], documents: Iterable[npt.ArrayLike],
                           dtype: npt.DTypeLike = np.uint16) -> tuple[str, str]:
    """Writes ``prefix.bin`` and ``prefix.idx`` holding one sequence per document.
    Returns the two paths."""
    dtype = np.dtype(dtype)
    if dtype not in _DTYPE_CODES:
        raise ValueError(f"dtype {dtype} cannot be stored in a Megatron dataset")
    prefix = os.fspath(prefix)
    sizes: list[int] = []
    with open(prefix + ".bin", "wb") as bin_file:
        for doc in documents:
            arr = np.asarray(doc, dtype=dtype)
            bin_file.write(arr.tobytes())
            sizes.append(int(arr.size))
    sizes_arr = np.asarray(sizes, dtype=np.int32)
    pointers = np.zeros(len(sizes), dtype=np.int64)
    if len(sizes) > 1:
        pointers[1:] = np.cumsum(sizes_arr[:-1].astype(np.int64)) * dtype.itemsize
    doc_idx = np.arange(len(sizes) + 1, dtype=np.int64)
    with open(prefix + ".idx", "wb") as idx:
        idx.write(b"MMIDIDX\x00\x00")
        idx.write(struct.pack("<Q", 1))
        idx.write(struct.pack("<B", _DTYPE_CODES[dtype]))
        idx.write(struct.pack("<Q", len(sizes)))
        idx.write(struct.pack("<Q", len(doc_idx)))
        idx.write(sizes_arr.tobytes())
        idx.write(pointers.tobytes())
        idx.write(doc_idx.tobytes())
    return prefix + ".bin", prefix + ".idx"


def synthetic_documents(num_docs: int, seed: int = 0, min_len: int = 20, max_len: int = 400,
                        vocab: int = 50000) -> list[npt.NDArray[np.int64]]:
    """Deterministic pseudo-random documents for demos and tests. Each document starts with
    a token that encodes its number, so a human can tell documents apart."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(min_len, max_len + 1, size=num_docs)
    return [rng.integers(1, vocab, size=int(n), dtype=np.int64) for n in lengths]
