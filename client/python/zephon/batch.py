"""Batch: one loaned slot of the ring, viewed as numpy arrays without a copy."""
from __future__ import annotations

import os
import ctypes
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
                 layout: dict[str, tuple]):
        self._reader = reader
        self.seq = seq
        self.lane = lane
        self.lane_batch_index = lane_batch_index
        self._layout = layout  # name -> (numpy dtype, shape, offset in the mapping, bytes)
        self._views: dict[str, np.ndarray] = {}
        self._released = False
        self._pid = os.getpid()

    @classmethod
    def _from_native(cls, reader, info: "_native.BatchInfo") -> "Batch":
        base = reader.region_base
        layout = {}
        for i in range(info.num_tensors):
            t = info.tensors[i]
            shape = tuple(t.shape[d] for d in range(t.ndim))
            layout[t.name.decode()] = (_DTYPES[t.dtype], shape,
                                       (t.data or base) - base, t.nbytes)
        return cls(reader, info.seq, info.lane, info.lane_batch_index, layout)

    def _view(self, name: str) -> np.ndarray:
        """A read-only numpy view of one tensor, sliced from the ring mapping (no copy).
        Views keep the mapping alive, never the loan: see the class comment."""
        view = self._views.get(name)
        if view is None:
            dtype, shape, offset, nbytes = self._layout[name]
            view = self._reader.region[offset:offset + nbytes].view(dtype).reshape(shape)
            self._views[name] = view
        return view

    # ----- fields ----------------------------------------------------------------------
    def __getitem__(self, name: str) -> np.ndarray:
        self._check_open()
        if name not in self._layout or name == "sample_ids":
            raise KeyError(f"batch has no field {name!r}; fields: {sorted(self.keys())}")
        return self._view(name)

    def keys(self) -> list[str]:
        return [k for k in self._layout if k != "sample_ids"]

    @property
    def ids(self) -> list[SampleId]:
        """The sample ids that contributed tokens, in order of first appearance."""
        self._check_open()
        if "sample_ids" not in self._layout:
            return []
        return [SampleId(a, b, c) for a, b, c in self._view("sample_ids").tolist()]

    @property
    def ids_array(self) -> np.ndarray:
        """``ids`` as an int64 array [n, 3] (a view, valid while the batch is open)."""
        self._check_open()
        return self._view("sample_ids")

    def to_training(self, return_labels: bool = True, as_torch: bool | None = None) -> dict[str, Any]:
        """Training inputs: ``input_ids`` = tokens[:, :-1], ``labels`` = tokens[:, 1:],
        ``positions`` aligned with the inputs. Views (no copy); torch tensors when torch is
        importable (or ``as_torch=True``), else numpy."""
        self._check_open()
        tokens = self._view("tokens")
        positions = self._view("positions") if "positions" in self._layout else None
        out: dict[str, Any] = {}
        if return_labels:
            out["input_ids"] = tokens[:, :-1]
            out["labels"] = tokens[:, 1:]
            if positions is not None:
                out["positions"] = positions[:, :-1]
        else:
            out["input_ids"] = tokens
            if positions is not None:
                out["positions"] = positions
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
        shapes = {k: v[1] for k, v in self._layout.items()}
        return f"Batch(seq={self.seq}, lane={self.lane}, lane_batch={self.lane_batch_index}, {shapes})"
