"""Batch: one loaned slot of the ring, viewed as numpy arrays without a copy."""
from __future__ import annotations

import ctypes
import os
from typing import Any, NamedTuple

import numpy as np

from . import _native, errors

# shm::DType codes -> numpy dtypes (shm/ring_layout.h).
_DTYPES = {1: np.uint8, 2: np.int8, 3: np.uint16, 4: np.int16, 5: np.uint32, 6: np.int32,
           7: np.uint64, 8: np.int64, 9: np.float32, 10: np.float64}


class SampleId(NamedTuple):
    """A sample pointer: dataset (position in the work source), shard, index in shard."""
    dataset: int
    shard: int
    index: int


class Batch:
    """One batch of this rank: named tensors (``batch["tokens"]``, ``batch["positions"]``,
    numpy views into shared memory) plus ``batch.ids``, the samples that contributed.

    The views are valid while the batch is open. It is released (delivered) by
    ``close()``, by leaving a ``with batch:`` block, when it is garbage-collected, or when
    the iterator needs its loan back (``Pipeline.options(max_open_batches=...)``, default
    1: asking for the next batch releases the previous one). After that the daemon may
    reuse the slot: copy what you need to keep (``np.array(batch["tokens"])``). Holding a
    batch holds back the ring for the whole DP group. A forked child never releases
    (or reads through the native reader) its parent's loans.
    """

    def __init__(self, reader, seq: int, lane: int, lane_batch_index: int,
                 tensors: dict[str, np.ndarray]):
        self._reader = reader
        self.seq = seq
        self.lane = lane
        self.lane_batch_index = lane_batch_index
        self._tensors = tensors
        self._released = False
        self._pid = os.getpid()

    @classmethod
    def _from_native(cls, reader, info: "_native.BatchInfo") -> "Batch":
        tensors: dict[str, np.ndarray] = {}
        for i in range(info.num_tensors):
            t = info.tensors[i]
            name = t.name.decode()
            dtype = np.dtype(_DTYPES[t.dtype])
            shape = tuple(int(t.shape[d]) for d in range(t.ndim))
            buf = (ctypes.c_byte * int(t.nbytes)).from_address(t.data) if t.nbytes else \
                bytearray()
            if t.nbytes:
                buf._zephon_reader = reader  # keeps the mapping alive as long as the view
            arr = np.frombuffer(buf, dtype=dtype, count=int(np.prod(shape, dtype=np.int64)))
            arr = arr.reshape(shape)
            arr.flags.writeable = False
            tensors[name] = arr
        return cls(reader, int(info.seq), int(info.lane), int(info.lane_batch_index), tensors)

    # ----- fields ----------------------------------------------------------------------
    def __getitem__(self, name: str) -> np.ndarray:
        self._check_open()
        if name not in self._tensors or name == "sample_ids":
            raise KeyError(f"batch has no field {name!r}; fields: {sorted(self.keys())}")
        return self._tensors[name]

    def keys(self) -> list[str]:
        return [k for k in self._tensors if k != "sample_ids"]

    @property
    def ids(self) -> list[SampleId]:
        """The sample ids that contributed tokens, in order of first appearance."""
        self._check_open()
        raw = self._tensors.get("sample_ids")
        if raw is None:
            return []
        return [SampleId(int(a), int(b), int(c)) for a, b, c in raw.tolist()]

    @property
    def ids_array(self) -> np.ndarray:
        """``ids`` as an int64 array [n, 3] (a view, valid while the batch is open)."""
        self._check_open()
        return self._tensors["sample_ids"]

    def to_training(self, return_labels: bool = True, as_torch: bool | None = None) -> dict[str, Any]:
        """Training inputs: ``input_ids`` = tokens[:, :-1], ``labels`` = tokens[:, 1:],
        ``positions`` aligned with the inputs. Views (no copy); torch tensors when torch is
        importable (or ``as_torch=True``), else numpy."""
        self._check_open()
        tokens = self._tensors["tokens"]
        out: dict[str, Any] = {}
        if return_labels:
            out["input_ids"] = tokens[:, :-1]
            out["labels"] = tokens[:, 1:]
            if "positions" in self._tensors:
                out["positions"] = self._tensors["positions"][:, :-1]
        else:
            out["input_ids"] = tokens
            if "positions" in self._tensors:
                out["positions"] = self._tensors["positions"]
        if as_torch is None:
            try:
                import torch  # noqa: F401
                as_torch = True
            except ImportError:
                as_torch = False
        if as_torch:
            import torch
            import warnings
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # read-only views: torch warns, does not copy
                out = {k: torch.from_numpy(v) for k, v in out.items()}
        out["ids"] = self.ids
        return out

    # ----- lifetime --------------------------------------------------------------------
    def close(self) -> None:
        """Releases (delivers) this batch. Idempotent."""
        if self._released:
            return
        self._released = True
        reader = self._reader
        if self._pid != os.getpid():
            return  # a forked child never releases its parent's loans
        if reader is not None and reader.handle:
            err = ctypes.c_void_p()
            code = _native.LIB.zephon_release(reader.handle, self.seq, ctypes.byref(err))
            if code != 0:
                message = _native.take_string(err)
                if code != errors.FAILED_PRECONDITION:  # already detached: nothing to deliver
                    raise errors.from_code(code, message)

    release = close

    @property
    def released(self) -> bool:
        return self._released

    def _check_open(self) -> None:
        if self._released:
            raise RuntimeError(f"batch {self.seq} was released; its shared memory may already "
                               "hold another batch (copy fields you want to keep)")

    def __enter__(self) -> "Batch":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        shapes = {k: tuple(v.shape) for k, v in self._tensors.items()}
        return f"Batch(seq={self.seq}, lane={self.lane}, lane_batch={self.lane_batch_index}, {shapes})"
