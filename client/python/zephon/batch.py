"""Batch: one loaned slot of the ring, viewed as numpy arrays without a copy."""
from __future__ import annotations

import json
import os
import ctypes
from typing import TYPE_CHECKING, Any, Mapping, NamedTuple, Sequence

import numpy as np
import numpy.typing as npt

from . import _native, errors

if TYPE_CHECKING:
    from .pipeline import _Reader

# shm::DType codes -> numpy dtypes (shm/ring_layout.h).
_DTYPES: dict[int, type[np.generic]] = {1: np.uint8, 2: np.int8, 3: np.uint16, 4: np.int16, 5: np.uint32, 6: np.int32,
           7: np.uint64, 8: np.int64, 9: np.float32, 10: np.float64}


# Where a tensor of a batch lies: (numpy scalar type, shape, offset in the ring mapping,
# bytes).
_TensorPlace = tuple[type[np.generic], tuple[int, ...], int, int]

# to_training(tokens_field=...): names of this batch's packed token tensor ("auto" as
# upstream's default; "input_ids" is upstream's usual field name).
_TOKENS_FIELD_NAMES = ("auto", "input_ids", "tokens")


class _RenameError(KeyError, ValueError):
    """to_training(rename_fields=...) named a key the call does not return: upstream
    raises ValueError, this library raised KeyError; both keep catching it."""

    def __str__(self) -> str:  # the message, not KeyError's repr of it
        return str(self.args[0]) if self.args else ""


def _resolve_dtype(dtype: Any) -> np.dtype[Any] | None:
    """to_training(dtype=...) -> a numpy dtype, or None (keep the ring's dtype, views).
    "auto" is int64 (torch.long for torch output, as upstream's default). Accepts numpy
    dtypes (and their names) and torch dtypes; only signed integers, so that a negative
    ignore_index fits the labels."""
    if dtype is None:
        return None
    if isinstance(dtype, str) and dtype == "auto":
        return np.dtype(np.int64)
    resolved = None
    try:
        resolved = np.dtype(dtype)
    except TypeError:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is not None and isinstance(dtype, torch.dtype):
            try:
                resolved = torch.empty(0, dtype=dtype).numpy().dtype
            except (TypeError, RuntimeError):
                resolved = None
    if resolved is None or resolved.kind != "i":
        raise ValueError(f"dtype={dtype!r}: to_training takes None (the ring's dtype, "
                         "zero-copy), 'auto' (int64) or a signed integer numpy/torch dtype "
                         "(e.g. torch.long, torch.int32, np.int64)")
    return resolved


class _Placement:
    """Where to_training puts its torch tensors: ``device`` (with ``non_blocking``) and
    page-locked memory (``pin``). Built by ``resolve``, which validates the arguments."""

    _warned_no_cuda = False  # pin_memory=True without CUDA warns once per process

    def __init__(self, device: Any, non_blocking: bool, pin: bool):
        self.device = device
        self.non_blocking = non_blocking
        self.pin = pin

    @classmethod
    def resolve(cls, device: Any, non_blocking: bool, pin_memory: bool,
                as_torch: bool | None) -> "_Placement | None":
        """None when the tensors stay where to_training makes them (``non_blocking``
        alone changes nothing: it applies to the copy to ``device``)."""
        if device is None and not pin_memory:
            return None
        if as_torch is False:
            raise ValueError("to_training(device=..., pin_memory=True) places torch "
                             "tensors; as_torch=False asks for numpy arrays: drop one")
        try:
            import torch
        except ImportError as e:
            raise ImportError("to_training(device=..., pin_memory=True) needs torch") from e
        from . import _cuda
        resolved = None
        if device is not None:
            try:
                resolved = torch.device(device)
            except (RuntimeError, TypeError, ValueError) as e:
                raise errors.InvalidOptionError(
                    f"to_training(device={device!r}): not a torch device ({e}); e.g. "
                    "'cuda', 'cuda:1', torch.device('cuda', local_rank) or 'cpu'",
                    errors.INVALID_ARGUMENT) from e
            if resolved.type == "cuda" and not _cuda.available():
                raise errors.InvalidOptionError(
                    f"to_training(device={device!r}): torch sees no CUDA device on this "
                    "machine (torch.cuda.is_available() is False); pass device=None (or "
                    "'cpu') where there is no GPU", errors.INVALID_ARGUMENT)
        pin = bool(pin_memory)
        if pin and not _cuda.available():
            if not cls._warned_no_cuda:
                cls._warned_no_cuda = True
                import warnings
                warnings.warn("to_training(pin_memory=True): torch sees no CUDA device, "
                              "so there is nothing to pin for; tensors are returned "
                              "unpinned (a no-op on this machine)", UserWarning, stacklevel=3)
            pin = False
        if resolved is None and not pin:
            return None
        return cls(resolved, non_blocking, pin)

    def apply(self, batch: "Batch", out: dict[str, Any]) -> dict[str, Any]:
        import torch
        from . import _cuda
        if self.pin:
            ring = batch._pin_ring()
            for key, value in out.items():
                if not isinstance(value, torch.Tensor):
                    continue
                address = value.data_ptr()
                if ring is None or not ring[0] <= address < ring[1]:
                    out[key] = _cuda.pinned_copy(value)  # computed, or not registered
        if self.device is not None:
            out = {k: _cuda.to_device(v, self.device, self.non_blocking)
                   if isinstance(v, torch.Tensor) else v for k, v in out.items()}
            if self.non_blocking and self.device.type == "cuda":
                batch._copy_events.append(_cuda.copy_done_event(self.device))
        return out


class SampleId(NamedTuple):
    """A sample pointer: dataset (position in the work source), shard, index in shard."""
    dataset: int
    shard: int
    # Shadows tuple.index (the field name is upstream's; SampleId(...).index is the
    # sample's index, never the tuple method).
    index: int  # type: ignore[assignment]


class SampleMeta(NamedTuple):
    """Where a record comes from: its sample, the lane that produced it and the global
    chunk of the work source it was drawn from."""
    sample_id: SampleId
    lane_id: int
    chunk_id: int


class SampleRecord:
    """One record of a pipeline without a packer (upstream's ``SampleRecord``):
    ``meta`` (:class:`SampleMeta`) and ``payload``, a dict of the record's fields:
    ``"input_ids"`` (int32 token ids), ``"loss_mask"`` (uint8, when the datasets carry
    one) and, with ``tokenize(preserve_upstream_payload=True)``, the source record's own
    fields: a JSONL line's every field (ints, strings, lists, ... as ``json`` reads them),
    a Parquet or MDS record's tokenized column (``{"text": ...}``). Arrays are
    zero-copy views of the batch they came from (valid while it is open) unless the
    record was yielded on its own (a pipeline without ``batch``: then they are
    copies)."""

    __slots__ = ("meta", "payload")

    def __init__(self, meta: SampleMeta, payload: dict[str, Any]) -> None:
        self.meta = meta
        self.payload = payload

    @property
    def id(self) -> SampleId:
        return self.meta.sample_id

    def __repr__(self) -> str:
        fields = {k: (f"{v.dtype}[{v.shape[0]}]" if isinstance(v, np.ndarray) else repr(v)[:40])
                  for k, v in self.payload.items()}
        return f"SampleRecord({self.meta}, {fields})"


class Batch:
    """One batch of this rank: named tensors (``batch["tokens"]``, ``batch["positions"]``,
    numpy views into shared memory) plus ``batch.ids``, the samples that contributed.

    The views are valid while the batch is open. It is released by
    ``close()``, by leaving a ``with batch:`` block, when it is garbage-collected, or when
    the iterator needs its loan back (``Pipeline.options(max_open_batches=...)``, default
    1: asking for the next batch releases the previous one). After that the daemon may
    reuse the slot: copy what you need to keep (``np.array(batch["tokens"])``). Holding a
    batch holds back the ring for the whole DP group. A forked child never releases
    (or reads through the native reader) its parent's loans.
    """

    def __init__(self, reader: _Reader, seq: int, lane: int, lane_batch_index: int,
                 layout: dict[str, _TensorPlace]) -> None:
        self._reader: _Reader | None = reader  # None once released
        self.seq = seq
        self.lane = lane
        self.lane_batch_index = lane_batch_index
        self._layout = layout  # name -> (numpy dtype, shape, offset in the mapping, bytes)
        self._views: dict[str, npt.NDArray[Any]] = {}
        self._released = False
        self._pid = os.getpid()
        # CUDA events after to_training(device=..., non_blocking=True) copies that may
        # still read this batch's slot: waited for before the slot is released.
        self._copy_events: list[Any] = []

    @classmethod
    def _from_native(cls, reader: _Reader, info: _native.BatchInfo) -> Batch:
        base = reader.region_base
        layout: dict[str, _TensorPlace] = {}
        for i in range(info.num_tensors):
            t = info.tensors[i]
            shape = tuple(t.shape[d] for d in range(t.ndim))
            layout[t.name.decode()] = (_DTYPES[t.dtype], shape,
                                       (t.data or base) - base, t.nbytes)
        return cls(reader, info.seq, info.lane, info.lane_batch_index, layout)

    def _view(self, name: str) -> npt.NDArray[Any]:
        """A read-only numpy view of one tensor, sliced from the ring mapping (no copy).
        Views keep the mapping alive, never the loan: see the class comment."""
        view = self._views.get(name)
        if view is None:
            dtype, shape, offset, nbytes = self._layout[name]
            region = self._reader.region if self._reader is not None else None
            if region is None:
                raise RuntimeError(f"batch {self.seq}: its Pipeline was closed")
            view = region[offset:offset + nbytes].view(dtype).reshape(shape)
            self._views[name] = view
        return view

    # ----- fields ----------------------------------------------------------------------
    def __getitem__(self, name: str) -> npt.NDArray[Any]:
        self._check_open()
        if name not in self._layout or name == "sample_ids":
            raise KeyError(f"batch has no field {name!r}; fields: {sorted(self.keys())}")
        return self._view(name)

    def keys(self) -> list[str]:
        return [k for k in self._layout if k != "sample_ids"]

    @property
    def ids(self) -> list[SampleId]:
        """The sample ids that contributed tokens, in order of first appearance (packed
        batches); one per row, repeats kept, for record batches."""
        self._check_open()
        if "sample_ids" not in self._layout:
            return []
        return [SampleId(a, b, c) for a, b, c in self._view("sample_ids").tolist()]

    @property
    def lane_ids(self) -> tuple[int, ...]:
        """Upstream's ``SampleBatch.lane_ids``: the lane of each row (every row of a batch
        comes from its one lane, ``self.lane``)."""
        return (self.lane,) * self.num_rows

    @property
    def num_rows(self) -> int:
        """Rows (records) in this batch."""
        if "record_offsets" in self._layout:
            return int(self._layout["record_offsets"][1][0]) - 1
        return int(self._layout["tokens"][1][0]) if "tokens" in self._layout else 0

    @property
    def is_records(self) -> bool:
        """A record batch (a pipeline without a packer): ragged rows, one whole sample
        each, read through :attr:`records`."""
        return "record_offsets" in self._layout

    @property
    def chunk_ids(self) -> tuple[int, ...]:
        """Record batches: the global chunk each record was drawn from (upstream's
        ``SampleBatch.chunk_ids``). ValueError for a packed batch, whose rows mix
        samples of several chunks (see :attr:`ids`)."""
        self._check_open()
        if "chunk_ids" not in self._layout:
            raise ValueError("chunk_ids: this batch is packed (its rows mix samples of "
                             "several chunks); record batches (no pack_flat) carry them")
        return tuple(self._view("chunk_ids").tolist())

    @property
    def records(self) -> tuple[SampleRecord, ...]:
        """Record batches: one :class:`SampleRecord` per row, in order. Payload arrays
        are zero-copy views (valid while the batch is open); texts are ``str``.
        ValueError for a packed batch (use ``to_training`` or ``packed_samples``)."""
        return self._records(copy=False)

    def _records(self, copy: bool) -> tuple[SampleRecord, ...]:
        self._check_open()
        if not self.is_records:
            raise ValueError("records: this batch is packed (pack_flat rows are not "
                             "records); build the Pipeline without pack_flat for record "
                             "batches, or use to_training()/packed_samples")
        offsets = self._view("record_offsets").tolist()
        tokens = self._view("tokens")
        mask = self._view("loss_mask") if "loss_mask" in self._layout else None
        source = self._view("payload") if "payload" in self._layout else None
        source_offsets = (self._view("payload_offsets").tolist() if source is not None
                          else None)
        ids = self._view("sample_ids").tolist()
        chunks = self._view("chunk_ids").tolist()
        out = []
        for r in range(len(offsets) - 1):
            a, b = offsets[r], offsets[r + 1]
            payload: dict[str, Any] = {}
            if source is not None:
                # The source record (a JSON object zephond kept beside the ids); the
                # fields the pipeline adds override same-named source fields.
                payload.update(json.loads(bytes(
                    source[source_offsets[r]:source_offsets[r + 1]]).decode("utf-8")))
            payload["input_ids"] = tokens[a:b].copy() if copy else tokens[a:b]
            if mask is not None:
                payload["loss_mask"] = mask[a:b].copy() if copy else mask[a:b]
            out.append(SampleRecord(SampleMeta(SampleId(*ids[r]), self.lane, chunks[r]),
                                    payload))
        return tuple(out)

    @property
    def ids_array(self) -> npt.NDArray[Any]:
        """``ids`` as an int64 array [n, 3] (a view, valid while the batch is open)."""
        self._check_open()
        return self._view("sample_ids")

    @property
    def segment_lengths(self) -> npt.NDArray[Any]:
        """pack_sequences: int32 [B, W], row r's segments' lengths in order, then zeros (a
        view, valid while the batch is open). KeyError for a pack_flat batch."""
        self._check_open()
        if "segment_lengths" not in self._layout:
            raise KeyError("this batch has no segment_lengths: it comes from pack_flat; "
                           "build the Pipeline with pack_sequences() to keep segments")
        return self._view("segment_lengths")

    @property
    def packed_samples(self) -> list[list[dict[str, npt.NDArray[Any]]]]:
        """pack_sequences' records as upstream's envelopes: one list per row, one dict per
        segment (a document, or a slice of one, in row order) holding its cells of each
        per-cell field: ``"tokens"``, plus ``"loss_mask"`` and ``"positions"`` when the
        batch has them. The arrays are zero-copy views of the batch (valid while it is
        open; copy to keep them). The cells after a row's segments (padding) are in no
        segment. KeyError for a pack_flat batch (use ``to_training`` there)."""
        lengths = self.segment_lengths
        fields = {name: self._view(name) for name in ("tokens", "loss_mask", "positions")
                  if name in self._layout}
        records: list[list[dict[str, npt.NDArray[Any]]]] = []
        for r, row in enumerate(lengths.tolist()):
            segments, start = [], 0
            for n in row:
                if n == 0:
                    break
                segments.append({k: v[r, start:start + n] for k, v in fields.items()})
                start += n
            records.append(segments)
        return records

    def to_training(self, return_labels: bool = False, as_torch: bool | None = None, *,
                    ignore_index: int = -100,
                    mask_document_boundaries: bool = False,
                    return_positions: bool = True,
                    return_cu_seqlens: bool = False,
                    return_num_valid_tokens: bool = False,
                    return_padding_mask: bool = False,
                    return_loss_mask: bool = False,
                    flatten: bool = False,
                    rename_fields: Mapping[str, str] | None = None,
                    tokens_field: str = "auto",
                    dtype: Any = "auto",
                    extra_fields: Sequence[str] = (),
                    exclude_fields: Sequence[str] = (),
                    position_mode: str = "preserve",
                    eos_mask_loss: bool = False,
                    eos_token_id: int | None = None,
                    pad_token_id: int = 0,
                    device: Any = None,
                    non_blocking: bool = False,
                    pin_memory: bool = False) -> dict[str, Any]:
        """Shapes this batch into what a language-model training step consumes.

        Fields (before ``rename_fields``), for ``tokens`` of shape [B, L]:

        - ``input_ids``: ``tokens[:, :-1]`` ([B, S], S = L - 1) with ``return_labels``,
          else all of ``tokens`` ([B, L]).
        - ``labels`` (``return_labels``): ``tokens[:, 1:]``, the next token of each input.
          A label whose target is a padding cell is ``ignore_index`` (padding algorithms
          of ``pack_flat``: the batch's ``valid_tokens`` says where each row's padding
          starts; the pad id itself is never compared). Wrap packing has no padding,
          so by default nothing is masked: the prediction from a document's last token
          to the next document's first token is trained on.
          ``mask_document_boundaries=True`` sets to ``ignore_index`` every label whose
          target is the first token of a segment (``positions == 0``).
          ``eos_mask_loss=True`` (needs ``eos_token_id``, an int) sets to ``ignore_index``
          every label whose *input* token is ``eos_token_id``: the prediction from a
          document's EOS to whatever follows it (upstream's definition). Needs labels.
        - SFT loss mask: when the batch carries ``loss_mask`` (uint8 [B, L]: a dataset
          with ``loss_mask_field`` or ``tokenize(loss_on=...)``; 1 = trained on, 0 =
          masked, padding always 0), the mask is *label-aligned*: ``labels[:, t]``
          (= ``tokens[:, t + 1]``) is kept iff ``loss_mask[:, t + 1] == 1``, else it is
          ``ignore_index``. So a completion's first token is predicted from the prompt's
          last token and trained on, while predictions of prompt tokens are not.
        - ``loss_mask`` (``return_loss_mask``): bool, aligned like ``labels``
          ([B, S]; [B, L] without labels): with labels, True exactly where the label is
          kept (not ``ignore_index``: the loss mask, padding and, when asked, the
          boundaries and EOS predictions); without labels, the batch's
          ``loss_mask`` (or, without one, the padding mask).
        - ``padding_mask`` (``return_padding_mask``): bool, aligned with ``input_ids``
          ([B, S] with labels, else [B, L]), True at real tokens and False at padding
          (all True without padding).
        - ``positions`` (``return_positions``): aligned with ``input_ids``. With
          ``position_mode="preserve"`` (default) the batch's positions, restarting at 0
          at every document segment (absent when the batch has none); with
          ``"sequence"``, ``0 .. width - 1`` in every row, ignoring documents (computed,
          so present even without a positions field). ``cu_seqlens`` and
          ``mask_document_boundaries`` always use the document positions.
        - ``cu_seqlens`` (``return_cu_seqlens``): int32 [n + 1], the segment boundaries
          over the flattened inputs (row-major, B*S tokens), e.g. ``[0, 4, 7, ..., B*S]``,
          as varlen / FlexAttention document masking wants them. A boundary is at each
          ``positions == 0`` and at the start of each row (attention never crosses rows).
          A row's padding is one more segment (its positions restart at 0), so a
          varlen kernel attends padding only to padding and no document to it; its
          labels are ``ignore_index``, so it adds nothing to the loss. Needs the
          ``positions`` field.
        - ``num_valid_tokens`` (``return_num_valid_tokens``, needs labels): a Python int,
          the number of labels that are not ``ignore_index`` (padding, loss-masked and
          EOS-masked labels excluded): the token count to normalise an SFT loss by.
        - ``ids``: the contributing :class:`SampleId` list (never renamed, never a tensor).

        Record batches (no ``pack_flat``): the records are right-padded with
        ``pad_token_id`` (default 0) to the longest record of the batch, and then shaped as
        a padding ``pack_flat`` batch (padding labels are ``ignore_index``; positions
        count from 0 in each record and again in its padding). ``pad_token_id`` changes
        nothing for packed batches.

        ``tokens_field``: which field holds the tokens; ``"auto"`` (default),
        ``"input_ids"`` and ``"tokens"`` all name this batch's packed ``tokens``; anything
        else raises ValueError. ``flatten=True`` reshapes [B, S] fields to [B*S].
        ``rename_fields`` renames output keys, e.g. ``{"input_ids": "tokens"}`` (Megatron
        style); a key this call does not return raises an error that is both a KeyError
        and a ValueError. ``exclude_fields`` drops output keys after renaming, e.g.
        ``("ids",)``; names not in the output are ignored (``"texts"`` never is).
        ``as_torch``: torch tensors (``torch.from_numpy``) when True, or when None and
        torch is importable; numpy arrays otherwise.

        ``extra_fields``: more of the batch's own fields to return under their names
        (e.g. ``("valid_tokens",)``, or ``"loss_mask"`` as the raw uint8 field); a
        per-cell field ([B, L]) is aligned with ``input_ids`` (its last column dropped
        with labels) and flattened with ``flatten``. A name this call already returns
        is returned once, shaped as above; a name the batch does not carry raises an
        error that is both a KeyError and a ValueError, listing its fields.

        ``dtype`` sets the integer dtype of ``input_ids``, ``labels`` and ``positions``
        (not the bool masks or extra fields; ``cu_seqlens`` stays int32): ``"auto"``
        (default, as upstream) is int64 (``torch.long``); a signed integer torch or numpy
        dtype (``torch.int32`` halves the bytes, ``np.int64``, ...); or ``None``, which
        keeps the ring's dtype (int32) and the zero-copy views described below. With a
        dtype those three fields are always copies (writable, valid after the batch is
        released). Unlike upstream, ``dtype=None`` does not return Python lists.

        ``device`` (torch output): every tensor is moved there, e.g. ``"cuda"`` or
        ``torch.device("cuda", local_rank)``, with ``non_blocking`` passed to
        ``Tensor.to``. A device the machine does not have raises InvalidOptionError
        (no silent fallback to the CPU). After a non-blocking copy to a GPU, the batch
        waits for the copies to finish before its ring slot is handed back (release,
        ``with``, or the next batch), so the daemon never overwrites a slot being read.

        ``pin_memory=True`` (torch output) returns page-locked CPU tensors, so a later
        ``.to("cuda", non_blocking=True)`` is asynchronous: the ring mapping is
        registered with CUDA (``cudaHostRegister``, once per Pipeline), so zero-copy
        views stay zero-copy and only computed fields are copied into pinned memory;
        where the driver refuses the registration, every tensor is copied into pinned
        memory instead (warned once). Without a CUDA device (torch sees none) it is a
        documented no-op: the tensors come back unpinned, with one UserWarning per
        process, so one script runs on GPU and CPU machines alike.

        Copies and views (``dtype=None``): ``input_ids``, ``labels`` and ``positions``
        are read-only views of the batch's shared memory (no copy; torch tensors share
        that memory too), so they are valid only while the batch is open (copy, e.g.
        ``.clone()`` or a device transfer, before releasing it), and must not be written
        to. These are copies: ``labels`` when ``mask_document_boundaries``,
        ``eos_mask_loss`` or the batch has padding or a loss mask (it is modified);
        ``padding_mask``; ``loss_mask``; ``positions`` with ``position_mode="sequence"``;
        ``input_ids``, ``labels`` and ``positions`` when ``flatten`` and
        ``return_labels`` (dropping a column per row makes them non-contiguous, so
        reshaping copies); ``cu_seqlens`` (computed). Unsigned token dtypes are widened
        to int64 in masked labels so that a negative ``ignore_index`` fits.
        """
        self._check_open()
        placement = _Placement.resolve(device, non_blocking, pin_memory, as_torch)
        if placement is not None:
            as_torch = True
        # Record batches are right-padded into [B, L] rows first (L = the longest
        # record) and then shaped like a padding pack_flat batch.
        fields = self._padded_records(pad_token_id) if self.is_records else None
        has = fields.__contains__ if fields is not None else self._layout.__contains__
        field = fields.__getitem__ if fields is not None else self._view
        if tokens_field not in _TOKENS_FIELD_NAMES:
            raise ValueError(
                f"tokens_field={tokens_field!r}: this batch's tokens are its 'tokens' field "
                f"(accepted names: {', '.join(map(repr, _TOKENS_FIELD_NAMES))}); "
                f"fields: {sorted(self.keys())}")
        if position_mode not in ("preserve", "sequence"):
            raise ValueError(f"position_mode={position_mode!r}: use 'preserve' or 'sequence'")
        if isinstance(exclude_fields, str):
            raise TypeError("exclude_fields must be a sequence of names, not a string")
        if isinstance(extra_fields, str):
            raise TypeError("extra_fields must be a sequence of names, not a string")
        field_names = sorted(fields) if fields is not None else self.keys()
        missing = [name for name in extra_fields if not has(name) or name == "sample_ids"]
        if missing:
            raise _RenameError(f"extra_fields names {missing}, which this batch does not "
                               f"carry; fields: {field_names}")
        if eos_mask_loss:
            if eos_token_id is None or isinstance(eos_token_id, bool) or not isinstance(
                    eos_token_id, (int, np.integer)):
                raise ValueError("eos_mask_loss=True needs eos_token_id, an int (the "
                                 f"tokenizer's EOS id); got {eos_token_id!r}")
            if not return_labels:
                raise ValueError("eos_mask_loss=True needs return_labels=True")
        out_dtype = _resolve_dtype(dtype)
        if not has("tokens"):
            raise KeyError(f"batch has no 'tokens' field; fields: {sorted(self.keys())}")
        if has("segment_lengths"):
            raise ValueError(
                "to_training converts pack_flat rows; this batch comes from pack_sequences "
                "(records of segments): read batch.packed_samples or batch.segment_lengths, "
                "or build the Pipeline with pack_flat(...) and call "
                "to_training(return_cu_seqlens=True) for varlen attention")
        if return_num_valid_tokens and not return_labels:
            raise ValueError("return_num_valid_tokens=True needs return_labels=True")
        tokens = field("tokens")
        if tokens.ndim != 2:
            raise ValueError(f"to_training needs 2-D tokens [B, L], got shape {tokens.shape}")
        positions = field("positions") if has("positions") else None
        if (return_cu_seqlens or mask_document_boundaries) and positions is None:
            raise ValueError("return_cu_seqlens and mask_document_boundaries need the "
                             "'positions' field (pack_flat(emit_positions=True))")
        # Real cells: each row's first valid_tokens[r] cells (padding algorithms only).
        real = None
        if has("valid_tokens"):
            valid = field("valid_tokens")
            real = np.arange(tokens.shape[1])[None, :] < valid[:, None]
        # Trained cells (SFT): loss_mask, which is 0 at padding too.
        trained = field("loss_mask") != 0 if has("loss_mask") else None
        out: dict[str, Any] = {}
        if return_labels:
            inputs = tokens[:, :-1]
            labels = tokens[:, 1:]
            in_pos = positions[:, :-1] if positions is not None else None
            masked = None
            if mask_document_boundaries:
                assert positions is not None  # checked above
                masked = positions[:, 1:] == 0
            if real is not None and not real.all():
                masked = ~real[:, 1:] if masked is None else masked | ~real[:, 1:]
            if trained is not None and not trained.all():
                masked = ~trained[:, 1:] if masked is None else masked | ~trained[:, 1:]
            if eos_mask_loss:
                # Upstream's definition: the label whose *input* token is EOS (the
                # prediction EOS -> next document's first token) is ignore_index. Upstream
                # tests (datologyai/zephon): tokens [1, 10, 2, 1, 20, 2] with
                # eos_token_id=2 give labels [10, 2, -100, 20, 2]
                # (shm-coalesce test of to_training(eos_mask_loss=True)); and
                # test_pack_flat_eos_loss_and_continuous_positions: loss_mask
                # [1, 1, 0, 1, 1], num_valid_tokens 4. Guide §6.4 / internals §5.3:
                # "optionally the EOS→next-doc prediction (eos_mask_loss)".
                at_eos = inputs == eos_token_id
                masked = at_eos if masked is None else masked | at_eos
            if masked is not None:
                label_dtype: Any = labels.dtype if labels.dtype.kind == "i" else np.int64
                labels = labels.astype(label_dtype, copy=True)  # never write shared memory
                labels[masked] = ignore_index
            out["input_ids"] = inputs
            out["labels"] = labels
            in_real = real[:, :-1] if real is not None else None
            if return_loss_mask:
                # Exactly the labels kept: the loss mask, padding and (when asked) the
                # document boundaries and EOS predictions together.
                out["loss_mask"] = (~masked if masked is not None
                                    else np.ones(labels.shape, dtype=bool))
        else:
            inputs = tokens
            in_pos = positions
            out["input_ids"] = inputs
            in_real = real
            if return_loss_mask:
                keep = trained if trained is not None else real
                out["loss_mask"] = (keep.copy() if keep is not None
                                    else np.ones(inputs.shape, dtype=bool))
        if return_padding_mask:
            out["padding_mask"] = (np.ascontiguousarray(in_real) if in_real is not None
                                   else np.ones(inputs.shape, dtype=bool))
        if return_positions:
            if position_mode == "sequence":
                rows, width = inputs.shape
                seq_dtype: Any = in_pos.dtype if in_pos is not None else np.int64
                out["positions"] = np.tile(np.arange(width, dtype=seq_dtype), (rows, 1))
            elif in_pos is not None:
                out["positions"] = in_pos
        if return_cu_seqlens:
            # Document positions even with position_mode="sequence" (as upstream: the
            # model's positions change, the attention boundaries do not).
            assert in_pos is not None  # checked above
            rows, width = in_pos.shape
            starts = np.flatnonzero(in_pos.reshape(-1) == 0)
            row_starts = np.arange(rows, dtype=np.int64) * width
            bounds = np.union1d(np.union1d(starts, row_starts), [rows * width])
            out["cu_seqlens"] = bounds.astype(np.int32)
        if return_num_valid_tokens:
            out["num_valid_tokens"] = int(np.count_nonzero(out["labels"] != ignore_index))
        per_cell = {"input_ids", "labels", "positions", "padding_mask", "loss_mask"}
        for name in extra_fields:
            if name in out:
                continue
            value = field(name)
            if value.ndim >= 2 and value.shape[:2] == tokens.shape:
                value = value[:, :inputs.shape[1]]
                per_cell.add(name)
            out[name] = value
        if out_dtype is not None:
            for key in ("input_ids", "labels", "positions"):
                if key in out:
                    # Always an owned copy (a view of shared memory is copied even when
                    # the dtype already matches; labels masked above are reused).
                    out[key] = out[key].astype(out_dtype, copy=not out[key].flags.owndata)
        if flatten:
            for key in per_cell:
                if key in out:
                    out[key] = out[key].reshape(out[key].shape[0] * out[key].shape[1],
                                                *out[key].shape[2:])
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
                out = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
                       for k, v in out.items()}
            if placement is not None:
                out = placement.apply(self, out)
        if rename_fields:
            unknown = set(rename_fields) - set(out)
            if unknown:
                raise _RenameError(f"rename_fields names {sorted(unknown)}, which this call "
                                   f"does not return; fields: {sorted(out)}")
            out = {rename_fields.get(k, k): v for k, v in out.items()}
        out["ids"] = self.ids
        for key in exclude_fields:
            out.pop(key, None)
        return out

    def _padded_records(self, pad_token_id: int) -> dict[str, npt.NDArray[Any]]:
        """A record batch as a padding pack_flat batch's fields: tokens/positions int32
        [B, L] (L = the longest record), valid_tokens [B], loss_mask [B, L] when the
        batch has one. Copies (the ring holds ragged rows)."""
        if isinstance(pad_token_id, bool) or not isinstance(pad_token_id, (int, np.integer)):
            raise ValueError(f"pad_token_id must be an int, got {pad_token_id!r}")
        offsets = self._view("record_offsets")
        lengths = np.diff(offsets)
        rows, width = len(lengths), int(lengths.max()) if len(lengths) else 0
        cols = np.arange(width)[None, :]
        real = cols < lengths[:, None]
        tokens = np.full((rows, width), pad_token_id, dtype=np.int32)
        tokens[real] = self._view("tokens")
        positions = np.where(real, cols, cols - lengths[:, None]).astype(np.int32)
        out: dict[str, npt.NDArray[Any]] = {"tokens": tokens, "positions": positions,
                                             "valid_tokens": lengths.astype(np.int32)}
        if "loss_mask" in self._layout:
            mask = np.zeros((rows, width), dtype=np.uint8)
            mask[real] = self._view("loss_mask")
            out["loss_mask"] = mask
        return out

    def _pin_ring(self) -> tuple[int, int] | None:
        """Registers this batch's ring mapping with CUDA, once per mapping; the mapping
        undoes it before unmapping. The ring's address range when it is registered, None
        when the registration was refused (then to_training pins by copying)."""
        from . import _cuda
        reader = self._reader
        assert reader is not None  # to_training checked that the batch is open
        mapping, region = reader.mapping, reader.region
        if region is None:
            raise RuntimeError(f"batch {self.seq}: its Pipeline was closed")
        base, size = reader.region_base, region.nbytes
        pinned = mapping.cuda_pinned
        if pinned is None:
            why = _cuda.register_host(base, size)
            pinned = mapping.cuda_pinned = (base, why is None)
            if why is not None:
                import warnings
                warnings.warn(f"to_training(pin_memory=True): the ring ({size} bytes) could "
                              f"not be registered with CUDA ({why}); each tensor is copied "
                              "into pinned memory instead", RuntimeWarning, stacklevel=4)
        return (base, base + size) if pinned[1] else None

    # ----- lifetime --------------------------------------------------------------------
    def close(self) -> None:
        """Releases this batch (its ring slot may be reused). Idempotent."""
        if self._released:
            return
        self._released = True
        # A released batch holds nothing: its views and its reader would keep the ring
        # mapped after the Pipeline is closed.
        reader, self._reader = self._reader, None
        self._views = {}
        if self._pid != os.getpid():
            return  # a forked child never releases its parent's loans
        events, self._copy_events = self._copy_events, []
        for event in events:
            event.synchronize()
        mapping = reader._mapping if reader is not None else None
        if mapping is not None and mapping.handle:
            err = ctypes.c_void_p()
            code = _native.LIB.zephon_release(mapping.handle, self.seq, ctypes.byref(err))
            if code != 0:
                message = _native.take_string(err)
                if code != errors.FAILED_PRECONDITION:  # already detached: nothing to release
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

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __repr__(self) -> str:
        shapes = {k: v[1] for k, v in self._layout.items()}
        return f"Batch(seq={self.seq}, lane={self.lane}, lane_batch={self.lane_batch_index}, {shapes})"
