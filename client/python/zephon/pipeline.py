"""The Pipeline: a declarative operator chain plus the rank's options; iterating it
attaches this rank to the node's zephond and yields its batches zero-copy.

Each Pipeline object that iterates is one attached rank. Several may live in one
process (tests drive many ranks this way); they are independent.
"""
from __future__ import annotations

import atexit
import base64
import ctypes
import json
import os
import sys
import threading
import warnings
import weakref
from typing import (TYPE_CHECKING, Any, Callable, Generator, Iterator, NoReturn, Optional,
                    Sequence, cast)

import numpy as np
import numpy.typing as npt

from . import _native, _spec_enums, _tokenize, _tokenizer_ids, errors
from . import progress as _progress
from .batch import Batch
from .sources import StaticMixtureWorkSource

if TYPE_CHECKING:
    from .tokenizer import Tokenizer, _TokenizerSource

# Options of Pipeline.options(): name -> where it goes in the attach request.
_RANK_OPTIONS = {"world_size", "global_rank", "dp_degree", "dp_group_id", "run_id",
                 "aggregate_dir", "aggregate_timeout_s", "local_peers", "leader_address"}
# Spec options go into PipelineSpec under the same names (proto/spec.proto).
_SPEC_OPTIONS = {"canonical_replicas", "mapping_strategy", "lane_routing",
                 "flush_every_k_chunks"}
_EXEC_OPTIONS = {"prefetch_batches", "read_timeout_s", "join_timeout_s", "num_threads",
                 "daemon_timeout_s", "audit"}
_CLIENT_OPTIONS = {"daemon", "attach_timeout_s", "max_open_batches", "progress"}
_ALL_OPTIONS = _RANK_OPTIONS | _SPEC_OPTIONS | _EXEC_OPTIONS | _CLIENT_OPTIONS
# Upstream's (the Python Zephon's RuntimeOptions) execution knobs that have no meaning
# for a daemon that computes every batch deterministically in its own process: accepted
# and ignored, so recipes written for upstream run unchanged (README, "Coming from the
# Python Zephon"). max_workers maps onto num_threads, io_options is validated.
_UPSTREAM_NOOP_OPTIONS = {
    "runner", "per_stage_runner", "mp_context", "worker_allocation", "default_stage_prefetch",
    "per_stage_prefetch", "op_queue_capacity", "ipc_transport", "ipc_buffer_bytes",
    "mixture_config", "allow_latency_flush_in_deterministic", "shutdown_mode",
    "auto_validation", "mtp_mode", "mtp_buffer", "mtp_buffer_bytes", "mtp_prefetch",
    "mtp_auto_checkpoint", "shm_coalesce", "shm_min_item_bytes",
    "shm_min_new_allocation_bytes", "shm_min_forward_bytes", "shm_compact_above_ratio",
    "shm_compact_min_savings_bytes", "shm_max_coalesced_bytes", "coalesce_tensors",
    "shm_min_size", "max_worker_retries", "aggregate_serializer", "aggregate_compressor",
    "execution_tracking", "metrics_sink_config"}
_UPSTREAM_OPTIONS = _UPSTREAM_NOOP_OPTIONS | {"deterministic", "max_workers", "io_options"}
_MAX_NUM_THREADS = 1024  # daemon/exec/worker_pool.h kMaxWorkerThreads

_live_readers: "weakref.WeakSet[_Reader]" = weakref.WeakSet()


def _check(code: int, err: ctypes.c_void_p) -> None:
    if code != 0:
        raise errors.from_code(code, _native.take_string(err))


class _Mapping:
    """Owns one native zephon_reader handle: its ring mapping and its connection to the
    daemon. Freed (unmapped, disconnected) by ``free()`` or when the last reference goes.

    The ring's numpy array holds this object through its ctypes buffer, and nothing here
    refers back to that array or to the _Reader: a reference cycle through a ctypes
    buffer's ``__dict__`` is invisible to the garbage collector (ctypes does not traverse
    it), which is how closed Pipelines used to keep their rings mapped until exit. So
    plain reference counting frees the mapping the moment the last view of it goes."""

    def __init__(self, handle: int) -> None:
        self.handle: int | None = handle
        self.pid = os.getpid()
        # The ring's registration with CUDA (to_training(pin_memory=True)): None = not
        # tried, else (base address, registered?). Undone before the ring is unmapped.
        self.cuda_pinned: tuple[int, bool] | None = None

    def free(self) -> None:
        handle, self.handle = self.handle, None
        pinned, self.cuda_pinned = self.cuda_pinned, None
        try:
            if pinned is not None and pinned[1] and self.pid == os.getpid():
                from . import _cuda
                _cuda.unregister_host(pinned[0])
        finally:  # torch half torn down at exit must not leak the ring
            if handle and self.pid == os.getpid():
                # In a forked child zephon_detach would speak on the parent's stream: the
                # child leaves the copy-on-write memory to its exit instead.
                _native.LIB.zephon_detach(handle)

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:  # interpreter shutdown
            pass


class _Reader:
    """One attached rank: its lease and ring mapping. Numpy views of a batch hold the
    mapping (not this object), so the mapping outlives every array handed out, and
    ``close()`` frees it at once when no array is left."""

    def __init__(self, handle: int, reply: dict[str, Any]) -> None:
        self.reply = reply
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self._mapping: _Mapping | None = _Mapping(handle)
        # The whole ring mapping as one read-only uint8 array: batches slice their
        # tensors out of it. Its buffer holds the _Mapping, so the mapping outlives every
        # view handed out; see _Mapping for why nothing may point back here.
        base, size = ctypes.c_void_p(), ctypes.c_uint64()
        _native.LIB.zephon_ring_region(handle, ctypes.byref(base), ctypes.byref(size))
        buffer = (ctypes.c_uint8 * size.value).from_address(cast(int, base.value))
        buffer._zephon_mapping = self._mapping  # type: ignore[attr-defined]
        self.region_base: int = cast(int, base.value)
        # numpy's stubs do not know ctypes arrays export the buffer protocol.
        region: npt.NDArray[np.uint8] = np.frombuffer(  # type: ignore[call-overload]
            buffer, dtype=np.uint8)
        region.flags.writeable = False
        self.region: npt.NDArray[np.uint8] | None = region
        self.info = _native.BatchInfo()  # reused for every batch: fields are copied out
        _live_readers.add(self)

    @property
    def handle(self) -> int | None:
        """The native handle, or None once closed. Callers keep ``mapping`` referenced
        for the duration of a native call (see ``mapping``)."""
        mapping = self._mapping
        return mapping.handle if mapping is not None else None

    @property
    def mapping(self) -> _Mapping:
        """The live mapping; raises once closed. Holding the returned object keeps the
        native handle valid across a call even if another thread closes the reader."""
        mapping = self._mapping
        if mapping is None or not mapping.handle:
            raise RuntimeError("this Pipeline is closed")
        return mapping

    def end_lease(self) -> None:
        """Detaches the rank from the daemon (the mapping stays)."""
        with self.lock:
            mapping = self._mapping
            if mapping is not None and mapping.handle and self.pid == os.getpid():
                _native.LIB.zephon_end_lease(mapping.handle)

    def close(self) -> None:
        """Ends the lease and drops this reader's hold on the ring mapping and the
        connection: both are freed now unless numpy arrays of batches are still alive,
        then when the last of them goes. Idempotent."""
        self.end_lease()
        with self.lock:
            mapping, self._mapping = self._mapping, None
            self.region = None
        # The last reference (unless a caller's array holds the buffer) frees it now.
        del mapping

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass


@atexit.register
def _detach_all() -> None:
    # A rank that exits without detaching looks like a crash to its peers; detach the
    # ones still open at interpreter exit.
    for reader in list(_live_readers):
        reader.end_lease()


class Pipeline:
    """``Pipeline(work_source).shuffle(...).pack_flat(...).batch(...).options(...)``.

    Builder methods change this Pipeline and return it (as upstream's do); iteration
    attaches this rank (once) and yields one :class:`Batch` per step.

    Loans: a batch is a loan of a ring slot. It is released by
    ``batch.close()``, by leaving ``with batch:``, by garbage collection, or when the
    iterator is asked for more batches than ``max_open_batches`` (default 1) allows to
    be open at once — then the oldest open batch is released first. Use
    ``max_open_batches=2`` to keep batch k open while batch k+1 is fetched (e.g. to
    overlap a host-to-device copy). Releases may come in any order; batches are taken in order.
    """

    # Set by prefetch(); absent until then (prefetch reads it with getattr).
    _prefetch_set: bool

    def __init__(self, work_source: StaticMixtureWorkSource) -> None:
        if not isinstance(work_source, StaticMixtureWorkSource):
            raise TypeError("Pipeline needs a zephon.StaticMixtureWorkSource")
        self._work_source = work_source
        self._operators: list[dict[str, Any]] = []
        self._options: dict[str, Any] = {}
        self._reader: _Reader | None = None
        self._restore: bytes | None = None
        self._open: list[Batch] = []  # loans handed out by the iterator, oldest first
        self._closed = False
        self._lease_ended = False  # an ended iteration's lease was handed back
        self._batches_taken = 0  # batches this Pipeline took from its ring

    # ----- builder -----------------------------------------------------------------
    def _with(self) -> "Pipeline":
        """The Pipeline the builders change: this one. As upstream's, builders mutate the
        Pipeline and return it, so ``p.pack_flat(...)`` without reassigning keeps the
        operator, and chained or separate calls build the same pipeline."""
        if self._reader is not None:
            raise RuntimeError("this Pipeline is already attached; build a new one")
        return self

    def tokenize(self, tokenizer: Tokenizer | _TokenizerSource | None = None, *,
                 tokenizer_id: str | None = None,
                 field: str | Sequence[str] = "text",
                 special_tokens: str = "bos_eos",
                 bos_token_id: int | None = None, eos_token_id: int | None = None,
                 max_length: int | None = None, truncation: bool = False,
                 split_long_samples: bool = False, on_missing: str = "error",
                 split_special_tokens: bool = False,
                 loss_on: Sequence[str] | None = None,
                 parallelism: int | None = None,
                 add_attention_mask: bool = False,
                 preserve_upstream_payload: bool = False) -> "Pipeline":
        """Reads the datasets as text: each record's string ``field`` (a JSONL field, or
        the text column of a Parquet or MDS dataset) is encoded in zephond (the same
        tokenizer as :class:`zephon.Tokenizer`) into one sample. The first operator
        (before shuffle/pack_flat/batch); every dataset must be JSONL, Parquet or MDS.

        ``tokenizer``: a tokenizer.json, an HF model directory holding one (its
        tokenizer_config.json names BOS/EOS) or a SentencePiece .model, as a local path
        (made absolute here) or an s3:// URL (read by zephond with its S3 settings); a
        :class:`zephon.Tokenizer` (its options are the defaults of the ones here); or an
        object with ``to_str()`` / ``backend_tokenizer.to_str()`` (a tokenizers or
        transformers tokenizer), whose JSON is sent to zephond. When this process can load
        the tokenizer, zephond refuses one whose content differs (fingerprint).
        ``special_tokens``: "bos_eos", "bos", "eos", "none" or "tokenizer_default" (what
        HF's add_special_tokens=True adds); ``bos_token_id`` / ``eos_token_id`` override
        the tokenizer's. ``max_length`` with ``truncation=True`` cuts longer samples, with
        ``split_long_samples=True`` splits them into max_length pieces. ``on_missing``:
        "error" (a record without a string ``field`` fails, naming file and line) or
        "skip". ``split_special_tokens=True`` encodes special tokens in the text as plain
        text.

        SFT prompt/completion (JSONL fields, Parquet or MDS string columns):
        ``field=["prompt", "completion"]`` tokenizes each field and concatenates them, in the order given, into one sample (BOS, per
        ``special_tokens``, before the first field's tokens, EOS after the last's);
        ``loss_on=["completion"]`` masks (loss mask 0) the tokens of the fields not
        listed (BOS counts with the first field, EOS with the last). Batches then carry
        ``loss_mask`` and :meth:`Batch.to_training` sets the masked labels to
        ``ignore_index``. Truncation and ``split_long_samples`` cut the mask with the
        tokens. Bad values raise InvalidOptionError (a ValueError) naming the argument.

        Upstream's spellings: ``tokenizer_id=`` instead of ``tokenizer`` (a local path, a
        Hugging Face model id resolved in the local Hugging Face cache, never downloaded,
        or ``"__fallback__"``, a built-in byte-level tokenizer for tests whose ids are not
        upstream's fallback's); ``parallelism`` is accepted (zephond tokenizes on its own
        worker pool); ``add_attention_mask=False`` is what zephond does (packed rows carry
        no attention mask: use ``to_training``'s ``padding_mask`` / ``cu_seqlens``);
        ``preserve_upstream_payload=True`` keeps each record's source beside its ids
        (zephond's token cache keeps it too): record batches (no ``pack_flat``) then
        carry a JSONL line's every field in ``record.payload`` (``payload["text"]``,
        ``payload["id"]``, ...), or a Parquet/MDS record's tokenized column, next to
        ``"input_ids"``. One ``field`` only. With a packer it changes nothing (a packed
        row has no one source record)."""
        if (tokenizer is None) == (tokenizer_id is None):
            raise errors.InvalidOptionError(
                "Pipeline.tokenize: pass the tokenizer (positional) or tokenizer_id=, "
                "exactly one", errors.INVALID_ARGUMENT)
        if tokenizer_id is not None:
            tokenizer = _tokenizer_ids.resolve(tokenizer_id)
        _check_parallelism("tokenize", parallelism)
        if add_attention_mask is not False:
            raise errors.InvalidOptionError(
                "Pipeline.tokenize: add_attention_mask=True is not supported: packed rows carry "
                "no attention mask; use to_training(return_padding_mask=True) or "
                "return_cu_seqlens=True", errors.INVALID_ARGUMENT)
        if not isinstance(preserve_upstream_payload, bool):
            raise errors.InvalidOptionError(
                f"Pipeline.tokenize: preserve_upstream_payload must be a bool, not "
                f"{preserve_upstream_payload!r}", errors.INVALID_ARGUMENT)
        if any("tokenize" in op for op in self._operators):
            raise errors.InvalidOptionError("Pipeline.tokenize: this Pipeline already "
                                            "tokenizes; call tokenize() once",
                                            errors.INVALID_ARGUMENT)
        if self._operators:
            raise errors.InvalidOptionError(
                f"Pipeline.tokenize: call tokenize() before {next(iter(self._operators[0]))}() "
                "(it turns text into the samples the other operators read)",
                errors.INVALID_ARGUMENT)
        op = _tokenize.tokenize_operator(
            tokenizer, field=field, special_tokens=special_tokens, bos_token_id=bos_token_id,
            eos_token_id=eos_token_id, max_length=max_length, truncation=truncation,
            split_long_samples=split_long_samples, on_missing=on_missing,
            split_special_tokens=split_special_tokens, loss_on=loss_on)
        if preserve_upstream_payload:
            if "fields" in op["tokenize"]:
                raise errors.InvalidOptionError(
                    "Pipeline.tokenize: preserve_upstream_payload=True keeps one text field, "
                    f"not field={list(field)!r}: tokenize one field, or drop it",
                    errors.INVALID_ARGUMENT)
            op["tokenize"]["keep_payload"] = True
        p = self._with()
        p._operators.append(op)
        return p

    def shuffle(self, buffer_size: int | None = 8192, seed: int = 0, *,
                algorithm: str = "streaming", warmup_growth: float | None = None,
                parallelism: int | None = None) -> "Pipeline":
        """Per-lane deterministic shuffle, emptied at every flush group's end. Before
        ``pack_flat`` it shuffles samples; between ``pack_flat`` and ``batch`` it shuffles
        packed rows (the flush group is packed, then its rows reordered). At most one
        shuffle in each position.

        ``algorithm``:

        - ``"streaming"`` (default; the shuffle of every pipeline before algorithms
          existed, same batches and spec hash): a reservoir of ``buffer_size`` items; once
          full, each arrival evicts a random one.
        - ``"block"``: tumbling blocks of ``buffer_size`` items, each permuted.
        - ``"block_warmup"``: blocks of ``max(1, min(128, buffer_size // 16))`` items
          first, each next one ``warmup_growth`` (default 1.5, in (1, 1024]) times larger
          up to ``buffer_size``: output starts sooner after a flush.

        ``buffer_size=None`` is the default 8192 and ``parallelism`` is accepted, as
        upstream spells them. Bad values raise InvalidOptionError (a ValueError) naming
        the argument."""
        def refuse(message: str) -> NoReturn:
            raise errors.InvalidOptionError(f"Pipeline.shuffle: {message}",
                                            errors.INVALID_ARGUMENT)

        if buffer_size is None:
            buffer_size = 8192
        _check_parallelism("shuffle", parallelism)

        names = [_PACKING if next(iter(op)) in _PACKERS else next(iter(op))
                 for op in self._operators]
        packer = next((next(iter(op)) for op in self._operators
                       if next(iter(op)) in _PACKERS), "pack_flat")
        if "batch" in names:
            refuse(f"shuffle after batch would reorder whole batches; call it between "
                   f"{packer}() and batch() to shuffle packed rows")
        position = names[names.index(_PACKING) + 1:] if _PACKING in names else names
        if "shuffle" in position:
            where = (f"between {packer} and batch" if _PACKING in names
                     else "before pack_flat")
            refuse(f"this Pipeline already shuffles {where}: one shuffle per position")
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 1:
            refuse(f"buffer_size must be an int >= 1, got {buffer_size!r}")
        algorithms = ("streaming", "block", "block_warmup")
        if algorithm not in algorithms:
            refuse(f"algorithm={algorithm!r} is not one of {', '.join(algorithms)}")
        op: dict[str, Any] = {"buffer_size": str(int(buffer_size)), "seed": str(int(seed))}
        if algorithm != "streaming":
            op["algorithm"] = algorithm
        if warmup_growth is not None:
            if algorithm != "block_warmup":
                refuse(f"warmup_growth applies to algorithm 'block_warmup', not {algorithm!r}")
            if isinstance(warmup_growth, bool) or not isinstance(warmup_growth, (int, float)) \
                    or not 1 < warmup_growth <= 1024:
                refuse(f"warmup_growth must be a number in (1, 1024], got {warmup_growth!r}")
            op["warmup_growth"] = float(warmup_growth)
        p = self._with()
        p._operators.append({"shuffle": op})
        return p

    def ensure_mixture(self, *, max_buffer_size: int | None = 1000,
                       drain_target_ratio: float = 0.8, obsolete_drain_rate: float = 0.1,
                       weight_by: str = "samples",
                       warn_tolerance: float | None = None) -> "Pipeline":
        """Reorders each lane's samples toward the work source's target mixture (its
        weights) with a bounded buffer and smooth weighted round robin: a sample of the
        dataset furthest behind its share leaves as soon as one is buffered; a full buffer
        drains to ``drain_target_ratio`` x ``max_buffer_size``; everything buffered leaves
        at each flush group's end. ``max_buffer_size=None`` is exact mode: the surplus
        over the target is dropped at each flush group's end (counted). ``weight_by``:
        "samples" or "tokens" (sample lengths; required when the work source weighs
        tokens). ``obsolete_drain_rate``: the output share of buffered datasets whose
        target weight is 0. ``warn_tolerance``: zephond logs a flush group whose achieved
        share is further than this from the target. Before ``pack_flat`` (after or before
        ``shuffle``), once. The achieved mixture is in ``explain()``, the daemon status
        and ``zephon_mixture_*`` metrics. It corrects drift within a flush group, not a
        structural imbalance (use token weights in the work source for that)."""
        def refuse(message: str) -> NoReturn:
            raise errors.InvalidOptionError(f"Pipeline.ensure_mixture: {message}",
                                            errors.INVALID_ARGUMENT)

        names = [next(iter(op)) for op in self._operators]
        if _PACKERS & set(names) or "batch" in names:
            refuse("call ensure_mixture() before pack_flat(): a packed row already mixes "
                   "datasets' tokens, and reordering rows cannot change the mixture")
        if "ensure_mixture" in names:
            refuse("this Pipeline already has ensure_mixture(); call it once")
        op: dict[str, Any] = {}
        if max_buffer_size is None:
            op["max_buffer_size"] = "0"
        elif isinstance(max_buffer_size, bool) or not isinstance(max_buffer_size, int) \
                or not 1 <= max_buffer_size <= 1 << 24:
            refuse(f"max_buffer_size must be an int in [1, 2**24] or None (exact mode), got "
                   f"{max_buffer_size!r}")
        else:
            op["max_buffer_size"] = str(max_buffer_size)

        def share(name: str, value: Any) -> float:  # a number in (0, 1]
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not 0 < value <= 1:
                refuse(f"{name} must be a number in (0, 1], got {value!r}")
            return float(value)

        if not isinstance(drain_target_ratio, (int, float)) or isinstance(drain_target_ratio, bool) \
                or not 0 <= drain_target_ratio < 1:
            refuse(f"drain_target_ratio must be a number in [0, 1), got {drain_target_ratio!r}")
        op["drain_target_ratio"] = float(drain_target_ratio)
        op["obsolete_drain_rate"] = share("obsolete_drain_rate", obsolete_drain_rate)
        if weight_by not in ("samples", "tokens"):
            refuse(f"weight_by={weight_by!r} is not one of samples, tokens")
        if weight_by == "samples" and getattr(self._work_source, "weight_by", "samples") == "tokens":
            refuse("weight_by='samples' with a work source weighing tokens (its weights are "
                   "token shares): use weight_by='tokens'")
        op["weight_by"] = weight_by
        if warn_tolerance is not None:
            op["warn_tolerance"] = share("warn_tolerance", warn_tolerance)
        p = self._with()
        p._operators.append({"ensure_mixture": op})
        return p

    def pack_flat(self, max_length: int, algorithm: str = "wrap",
                  emit_positions: bool = True, *, pad_token_id: int | None = None,
                  num_bins: int | None = None, drop_oversized: bool = True,
                  candidate_pool_size: int | None = None,
                  max_candidate_age: int | None = None,
                  min_sequence_length: int | None = None,
                  flush_strategy: str | None = None,
                  max_sequences_per_bin: int | None = None,
                  parallelism: int | None = None) -> "Pipeline":
        """Packs each lane's samples into records of exactly ``max_length`` cells
        (normally seq_len + 1). ``positions`` restart at 0 for every piece of a document.
        All packing state is per lane and emptied at each flush group's end.

        ``algorithm``:

        - ``"wrap"`` (default): one token stream cut into full records, documents split
          across records; the tail that does not fill a record is dropped at each flush
          (pretraining). Never pads, so it takes none of the options below.
        - ``"first_fit"`` / ``"best_fit"``: at most ``num_bins`` (required, 1..4096) open
          bins per lane; a document goes whole into the first bin with room (first_fit)
          or the one left with the least room (best_fit); with none, a bin is opened (the
          oldest open bin is emitted first when ``num_bins`` are open). A full bin is
          emitted at once, every open bin at the flush, padded. A document longer than
          ``max_length`` is dropped (``drop_oversized=True``) or split into
          ``max_length`` pieces; counted either way (``explain()``, metrics) (SFT).
        - ``"best_fit_wrap"``: a lookahead pool of ``candidate_pool_size`` (1024)
          documents; each record takes documents pooled for more than
          ``max_candidate_age`` (8 x the pool) later arrivals, then the largest documents
          that fit whole, then the first tokens of the largest one (at most one split
          per record). Records are full except at a flush.

        ``pad_token_id`` (required by every algorithm but wrap) fills a record's tail;
        padding cells have positions 0, 1, ... (one padding segment) and batches then
        carry ``valid_tokens`` (int32 [B], the real cells of each row, which come
        first); ``Batch.to_training`` masks padding labels. Bad values raise
        InvalidOptionError (a ValueError) naming the argument.

        Packing knobs (upstream's names; unset = the behaviour above):
        ``min_sequence_length`` (first_fit/best_fit) emits a bin as soon as its room
        falls below it; ``flush_strategy`` (first_fit/best_fit) picks the bin emitted at
        the ``num_bins`` limit: ``"fifo"`` (the oldest) or ``"fullest"``;
        ``max_sequences_per_bin`` (every padding algorithm) caps the documents (pieces)
        per record. ``parallelism`` is accepted as upstream spells it (zephond plans
        packing per lane and materializes on its worker pool)."""
        _check_parallelism("pack_flat", parallelism)
        return self._packing("pack_flat", max_length, algorithm, emit_positions,
                             pad_token_id=pad_token_id, num_bins=num_bins,
                             drop_oversized=drop_oversized,
                             candidate_pool_size=candidate_pool_size,
                             max_candidate_age=max_candidate_age,
                             min_sequence_length=min_sequence_length,
                             flush_strategy=flush_strategy,
                             max_sequences_per_bin=max_sequences_per_bin)

    def pack_sequences(self, max_length: int, algorithm: str = "first_fit",
                       emit_positions: bool = False, *, num_bins: int | None = None,
                       pad_token_id: int | None = None, drop_oversized: bool = True,
                       candidate_pool_size: int | None = None,
                       max_candidate_age: int | None = None,
                       min_sequence_length: int | None = None,
                       flush_strategy: str | None = None,
                       max_sequences_per_bin: int | None = None,
                       parallelism: int | None = None) -> "Pipeline":
        """Packs like :meth:`pack_flat` (the same algorithms, options and records) and keeps
        each record's segment boundaries, for varlen attention: upstream's envelope of
        segments. Each batch carries ``segment_lengths`` (int32 [B, W]: row r's segments'
        lengths in order, then zeros; W is the batch's most segments in a row) and
        ``Batch.packed_samples`` gives the segments themselves (zero-copy views). With
        first_fit / best_fit a segment is a whole document (unless ``drop_oversized=False``
        splits a long one); with wrap / best_fit_wrap, a slice of one.

        Differences from pack_flat: ``algorithm`` defaults to ``"first_fit"`` (upstream's
        default; it needs ``num_bins``); ``emit_positions`` defaults to False (the
        segments carry the boundaries); ``pad_token_id`` is optional (default 0): the
        cells after a record's segments are not data. ``to_training`` does not convert
        these batches (use pack_flat for that); ``max_sequences_per_bin`` also bounds W,
        and so the ring's slot size (without it, W may reach ``max_length``)."""
        _check_parallelism("pack_sequences", parallelism)
        if pad_token_id is None and algorithm != "wrap":
            pad_token_id = 0
        return self._packing("pack_sequences", max_length, algorithm, emit_positions,
                             pad_token_id=pad_token_id, num_bins=num_bins,
                             drop_oversized=drop_oversized,
                             candidate_pool_size=candidate_pool_size,
                             max_candidate_age=max_candidate_age,
                             min_sequence_length=min_sequence_length,
                             flush_strategy=flush_strategy,
                             max_sequences_per_bin=max_sequences_per_bin)

    def _packing(self, name: str, max_length: int, algorithm: str, emit_positions: bool, *,
                 pad_token_id: int | None, num_bins: int | None, drop_oversized: bool,
                 candidate_pool_size: int | None, max_candidate_age: int | None,
                 min_sequence_length: int | None, flush_strategy: str | None,
                 max_sequences_per_bin: int | None) -> "Pipeline":
        """The packing operator `name` ("pack_flat" or "pack_sequences"), validated."""
        def refuse(message: str) -> NoReturn:
            raise errors.InvalidOptionError(f"Pipeline.{name}: {message}",
                                            errors.INVALID_ARGUMENT)

        names = [next(iter(op)) for op in self._operators]
        packer = set(names) & _PACKERS
        if packer:
            refuse(f"this Pipeline already packs with {packer.pop()}(): one packing operator")
        if "batch" in names:
            refuse(f"call {name}() before batch()")
        algorithms = ("wrap", "first_fit", "best_fit", "best_fit_wrap")
        if algorithm not in algorithms:
            refuse(f"algorithm={algorithm!r} is not one of {', '.join(algorithms)}")
        op: dict[str, Any] = {"max_length": str(int(max_length)), "algorithm": algorithm,
                              "emit_positions": bool(emit_positions)}
        bins = algorithm in ("first_fit", "best_fit")
        if algorithm == "wrap":
            if pad_token_id is not None:
                refuse("algorithm 'wrap' never pads (it drops each flush's tail): remove "
                       "pad_token_id or pick first_fit, best_fit or best_fit_wrap")
        elif pad_token_id is None:
            refuse(f"algorithm {algorithm!r} pads its records and needs pad_token_id (e.g. "
                   "the tokenizer's pad or eos id)")
        elif isinstance(pad_token_id, bool) or not isinstance(pad_token_id, int) \
                or not 0 <= pad_token_id < 2**31:
            refuse(f"pad_token_id must be an int in [0, 2**31), got {pad_token_id!r}")
        else:
            op["pad_token_id"] = pad_token_id
        if bins:
            if num_bins is None:
                refuse(f"algorithm {algorithm!r} needs num_bins (open bins per lane, 1..4096)")
            if isinstance(num_bins, bool) or not isinstance(num_bins, int) \
                    or not 1 <= num_bins <= 4096:
                refuse(f"num_bins must be an int in [1, 4096], got {num_bins!r}")
            op["num_bins"] = num_bins
            op["drop_oversized"] = bool(drop_oversized)
        else:
            if num_bins is not None:
                refuse(f"num_bins applies to first_fit and best_fit, not {algorithm!r}")
            if not drop_oversized:
                refuse(f"drop_oversized applies to first_fit and best_fit, not {algorithm!r} "
                       "(which splits long documents)")
        for field, value in (("candidate_pool_size", candidate_pool_size),
                             ("max_candidate_age", max_candidate_age)):
            if value is None:
                continue
            if algorithm != "best_fit_wrap":
                refuse(f"{field} applies to best_fit_wrap, not {algorithm!r}")
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                refuse(f"{field} must be an int >= 1, got {value!r}")
            op[field] = str(value) if field == "max_candidate_age" else value
        _add_packing_knobs(op, algorithm, refuse, min_sequence_length=min_sequence_length,
                           flush_strategy=flush_strategy,
                           max_sequences_per_bin=max_sequences_per_bin)
        p = self._with()
        p._operators.append({name: op})
        return p

    # ----- upstream's other builders ----------------------------------------------------
    def decode_text(self, *, parallelism: int | None = None) -> "Pipeline":
        """Upstream's bytes -> str step before ``tokenize``. zephond reads text records
        (JSONL fields, Parquet/MDS string columns) as text already, so this changes
        nothing; it is accepted before any other operator."""
        _check_parallelism("decode_text", parallelism)
        if self._operators:
            raise errors.InvalidOptionError(
                f"Pipeline.decode_text: call it before {next(iter(self._operators[0]))}()",
                errors.INVALID_ARGUMENT)
        return self._with()

    def _delay(self, max_delay_ms: float = 1.0, parallelism: int | None = None) -> "Pipeline":
        """Upstream's test-only operator (random per-record delays that exercise its
        reordering). zephond's order never depends on timing, so it changes nothing."""
        if isinstance(max_delay_ms, bool) or not isinstance(max_delay_ms, (int, float)) \
                or max_delay_ms < 0:
            raise errors.InvalidOptionError(
                f"Pipeline._delay: max_delay_ms must be a number >= 0, not {max_delay_ms!r}",
                errors.INVALID_ARGUMENT)
        _check_parallelism("_delay", parallelism)
        return self._with()

    def fetch_parallelism(self, parallelism: int) -> "Pipeline":
        """Upstream's number of concurrent shard fetches. zephond reads shards with its
        own readers (``--shards-at-once``, the shard cache's downloads), node-wide; the
        value is checked and changes nothing."""
        _check_parallelism("fetch_parallelism", parallelism, required=True)
        return self._with()

    def prefetch(self, buffer_size: int = 2, parallelism: int | None = None) -> "Pipeline":
        """Upstream's read-ahead of fetched items. zephond fills the ring ahead of the
        trainer (``options(prefetch_batches=...)``); the values are checked and change
        nothing. Once per Pipeline, as upstream."""
        if getattr(self, "_prefetch_set", False):
            raise RuntimeError("Pipeline.prefetch: already called; call it once")
        if isinstance(buffer_size, bool) or not isinstance(buffer_size, int) or buffer_size < 1:
            raise errors.InvalidOptionError(
                f"Pipeline.prefetch: buffer_size must be an int >= 1, not {buffer_size!r}",
                errors.INVALID_ARGUMENT)
        _check_parallelism("prefetch", parallelism)
        self._with()._prefetch_set = True
        return self

    def preflight_tokenizers(self, strict: bool = True) -> dict[str, Any]:
        """Loads this Pipeline's tokenizer here, as zephond will, before any rank attaches:
        returns ``{"tokenize": {"source": ..., "loaded": bool, "fingerprint": ...}}``
        (empty without tokenize). A tokenizer that cannot be loaded raises
        InvalidOptionError with ``strict`` (else ``loaded`` is False with ``error``). An
        s3:// tokenizer is zephond's to load: reported, not loaded."""
        from .tokenizer import Tokenizer
        report: dict[str, Any] = {}
        for op in self._operators:
            t = op.get("tokenize")
            if t is None:
                continue
            entry: dict[str, Any] = {"source": t.get("tokenizer_path", "inline tokenizer.json")}
            path = t.get("tokenizer_path")
            if path is not None and path.startswith("s3://"):
                entry.update(loaded=False, note="an s3:// tokenizer is loaded by zephond")
            else:
                # Loaded with the ids the operator asks for, as zephond will load it.
                opts = {"split_special_tokens": bool(t.get("split_special_tokens", False)),
                        "bos_token_id": t.get("bos_token_id"),
                        "eos_token_id": t.get("eos_token_id")}
                try:
                    tok = (Tokenizer(path, **opts) if path is not None else
                           _tokenize._reload_json({"tokenizer_json":
                                                   base64.b64decode(t["tokenizer_json"]),
                                                   "tokenizer_config_json":
                                                   base64.b64decode(t["tokenizer_config_json"])
                                                   if t.get("tokenizer_config_json") else None},
                                                  opts))
                    entry.update(loaded=True, fingerprint=t.get("fingerprint", tok.fingerprint))
                except (errors.ZephonError, OSError, ValueError) as e:
                    if strict:
                        raise errors.InvalidOptionError(
                            f"Pipeline.preflight_tokenizers: {entry['source']}: {e}",
                            errors.INVALID_ARGUMENT) from None
                    entry.update(loaded=False, error=str(e))
            report["tokenize"] = entry
        return report

    def batch(self, microbatch_size: int, drop_last: bool = True) -> "Pipeline":
        """Groups ``microbatch_size`` records of one lane into a batch: packed rows after
        ``pack_flat``/``pack_sequences``, else whole samples (a record batch: ragged
        rows, read through :attr:`Batch.records`). A pipeline without ``batch`` (and
        without a packer) yields one :class:`zephon.types.SampleRecord` at a time."""
        p = self._with()
        p._operators.append({"batch": {"microbatch_size": str(int(microbatch_size)),
                                       "drop_last": bool(drop_last)}})
        return p

    def options(self, **kwargs: Any) -> "Pipeline":
        """Data identity (dp_degree, dp_group_id), coordination identity (world_size,
        global_rank, run_id, aggregate_dir), lanes (canonical_replicas, mapping_strategy,
        lane_routing) and execution knobs.

        ``run_id`` is required when ``world_size > 1``; left unset, it is taken from
        ``$ZEPHON_RUN_ID`` when that is set (a launcher naming the job for all its ranks).
        A relative ``aggregate_dir`` is made absolute against the current directory now.
        ``canonical_replicas`` left unset (None) is the initial dp_degree; an explicit 0 is
        refused. Bounds: world_size <= 131072, canonical_replicas <= 65536.

        ``audit=True`` makes zephond append a record of every batch it publishes (lane,
        lane batch, SHA-256 of the tokens, sample ids) to ``aggregate_dir/<run_id>/audit``
        for ``zephonctl audit diff/verify`` (docs/provenance.md).

        Upstream's execution knobs are accepted: ``max_workers`` sets ``num_threads``
        (zephond's worker threads for this pipeline, at most 1024) unless that is given;
        ``io_options`` (a dict or ``zephon.io.StoreOptions``) is validated, the caches
        being zephond's; ``deterministic=True`` is what zephond always is and
        ``deterministic=False`` is refused; ``runner``, ``mtp_mode``, ``op_queue_capacity``,
        ``default_stage_prefetch`` and the other process-layout knobs change nothing
        (the daemon is already another process). An unknown name warns (as upstream
        does), naming the closest known option, and is ignored, except one closest to an
        identity option (``dp_group``, ``global_rnk``, ...), which raises TypeError: a
        quietly dropped identity would give ranks the wrong data.

        ``progress=False`` silences the line this rank shows on an interactive stderr
        while its first batch takes longer than a few seconds (a first attach tokenizing
        a text corpus, or downloading an s3:// dataset; ``zephon.progress``); so does
        ``ZEPHON_PROGRESS=0``. A log file or pipe never gets it."""
        known = _ALL_OPTIONS | _UPSTREAM_OPTIONS
        if "progress" in kwargs and not isinstance(kwargs["progress"], bool):
            raise errors.InvalidOptionError(
                f"progress={kwargs['progress']!r} is invalid: expected True or False",
                errors.INVALID_ARGUMENT)
        for name in sorted(set(kwargs) - known):
            import difflib  # here, not at the top: 1-2 ms off every rank's first batch
            close = difflib.get_close_matches(name, sorted(known), n=1)
            if close and close[0] in _RANK_OPTIONS | _SPEC_OPTIONS:
                # A misspelt data- or coordination-identity option must not pass quietly:
                # every rank would get the default (e.g. the same DP group's data).
                raise TypeError(f"unknown Pipeline option {name!r}; did you mean "
                                f"{close[0]!r}? (identity options are never ignored)")
            hint = f"; did you mean {close[0]!r}?" if close else ""
            warnings.warn(f"unknown Pipeline option {name!r} ignored{hint}", UserWarning,
                          stacklevel=2)
            del kwargs[name]
        if "deterministic" in kwargs:
            if kwargs.pop("deterministic") is False:
                raise errors.InvalidOptionError(
                    "Pipeline.options: deterministic=False is not supported: zephond computes "
                    "every batch as a pure function of the spec and lane positions, which is "
                    "what makes checkpoints and elastic resume exact; drop the option",
                    errors.INVALID_ARGUMENT)
        if "io_options" in kwargs:
            from .io.options import StoreOptions
            StoreOptions.from_any(kwargs.pop("io_options"))
        max_workers = kwargs.pop("max_workers", None)
        if max_workers is not None and "num_threads" not in kwargs \
                and "num_threads" not in self._options:
            if isinstance(max_workers, bool) or not isinstance(max_workers, int) \
                    or max_workers < 1:
                raise TypeError(f"option max_workers must be an int >= 1, got {max_workers!r}")
            kwargs["num_threads"] = min(max_workers, _MAX_NUM_THREADS)
        for name in _UPSTREAM_NOOP_OPTIONS & kwargs.keys():
            del kwargs[name]
        aggregate_dir = kwargs.get("aggregate_dir")
        if aggregate_dir is not None:
            # zephond does not share this process's cwd (and refuses a relative path):
            # resolve it here and now, like Dataset paths. URLs go as written.
            aggregate_dir = os.fspath(aggregate_dir)
            if aggregate_dir and "://" not in aggregate_dir:
                kwargs["aggregate_dir"] = os.path.abspath(aggregate_dir)
        for name in _spec_enums.CHOICES.keys() & kwargs.keys():
            if kwargs[name] is not None:
                _spec_enums.check(name, kwargs[name])
        p = self._with()
        p._options.update(kwargs)
        return p

    # ----- the attach request ------------------------------------------------------------
    def _operators_sent(self) -> list[dict[str, Any]]:
        """The operators as zephond gets them: a pipeline without batch (and without a
        packer) yields records one at a time, which zephond serves as batch(1); keep_payload
        only where records carry text (without a packer)."""
        names = {next(iter(op)) for op in self._operators}
        ops = list(self._operators)
        if names & _PACKERS:
            ops = [{"tokenize": {k: v for k, v in op["tokenize"].items() if k != "keep_payload"}}
                   if "tokenize" in op else op for op in ops]
        elif "batch" not in names:
            ops.append({"batch": {"microbatch_size": "1", "drop_last": False}})
        return ops

    def _yields_records(self) -> bool:
        """Iteration yields SampleRecords (no batch, no packer), not batches."""
        names = {next(iter(op)) for op in self._operators}
        return not names & _PACKERS and "batch" not in names

    def _request(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"format_version": 1,
                                "work_source": self._work_source.to_spec(),
                                "operators": self._operators_sent()}
        rank: dict[str, Any] = {}
        execution: dict[str, Any] = {}
        for name, value in self._options.items():
            if value is None:
                continue
            if name in _SPEC_OPTIONS:
                spec[name] = (_spec_enums.to_proto(name, value)
                              if name in _spec_enums.CHOICES else value)
            elif name in _RANK_OPTIONS:
                rank[name] = value
            elif name in _EXEC_OPTIONS:
                execution[name] = value
        for name in ("world_size", "global_rank", "dp_degree", "dp_group_id", "local_peers",
                     "canonical_replicas"):
            value = rank.get(name, spec.get(name))
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"option {name} must be an int, got {value!r}")
        if "run_id" not in rank and int(rank.get("world_size", 1)) > 1 \
                and os.environ.get("ZEPHON_RUN_ID"):
            # A launcher names the job once for all its ranks (the guide's run_id, unique
            # to the training run); an explicit run_id option wins.
            rank["run_id"] = os.environ["ZEPHON_RUN_ID"]
        if "local_peers" not in rank and os.environ.get("LOCAL_WORLD_SIZE", "").isdigit():
            rank["local_peers"] = int(os.environ["LOCAL_WORLD_SIZE"])
        for name in ("world_size", "global_rank", "dp_degree", "dp_group_id",
                     "canonical_replicas"):
            if name in rank:
                rank[name] = str(rank[name])
        if "canonical_replicas" in spec:
            spec["canonical_replicas"] = str(spec["canonical_replicas"])
        request: dict[str, Any] = {"spec": spec, "rank": rank, "execution": execution,
                                   "client_pid": str(os.getpid()),
                                   "client_label": f"python pid {os.getpid()}"}
        if self._restore is not None:
            request["restore_checkpoint"] = base64.b64encode(self._restore).decode()
        return request

    # ----- attach / iterate ------------------------------------------------------------
    def _attach(self) -> _Reader:
        if self._closed:
            raise RuntimeError("this Pipeline is closed")
        if self._lease_ended:
            raise RuntimeError(
                "this Pipeline's lease went to a newer Pipeline of the same rank in this "
                "process (its iteration had ended); iterate that one, or build a new one")
        if self._reader is None:
            # A Pipeline of this process with the same rank whose iteration ended hands
            # its lease back first (upstream closes the engine with its iterator): one
            # rank attached twice would be two readers of one rank's stream.
            me = self._rank_key()
            for ended in list(_ENDED_ITERATIONS):
                if ended is not self and ended._rank_key() == me:
                    ended._end_lease()
        if self._reader is not None:
            if self._reader.pid != os.getpid():
                raise RuntimeError("this Pipeline was attached in another process (fork); build "
                                   "a new Pipeline in the child")
            return self._reader
        handle = ctypes.c_void_p()
        reply = ctypes.c_void_p()
        err = ctypes.c_void_p()
        code = _native.LIB.zephon_attach(
            _native.encode(self._options.get("daemon")), _native.encode(_native.zephond_path()),
            json.dumps(self._request()).encode(), float(self._options.get("attach_timeout_s", 60)),
            ctypes.byref(handle), ctypes.byref(reply), ctypes.byref(err))
        _check(code, err)
        info = json.loads(_native.take_string(reply))
        for message in info.get("warnings", []):
            warnings.warn(message, RuntimeWarning, stacklevel=3)
        self._reader = _Reader(cast(int, handle.value), info)
        return self._reader

    def attach(self) -> "Pipeline":
        """Attaches now (iteration does it implicitly). Returns self."""
        self._attach()
        return self

    def _rank_key(self) -> tuple[Any, ...]:
        """Who this Pipeline is to zephond: its daemon, run, rank (world_size,
        global_rank, dp identity) and spec. A newer Pipeline with the same key is the
        same pipeline of the same rank built again (upstream's tests do so after each
        iteration); another pipeline (an eval set, another spec) never takes a lease."""
        o = self._options
        run_id = o.get("run_id")
        world = o.get("world_size", 1)
        if run_id is None and isinstance(world, int) and world > 1:
            run_id = os.environ.get("ZEPHON_RUN_ID")
        spec = json.dumps(self._request()["spec"], sort_keys=True, default=str)
        return (o.get("daemon") or os.environ.get("ZEPHON_SOCKET"), run_id, world,
                o.get("global_rank", 0), o.get("dp_degree", 1), o.get("dp_group_id", 0), spec)

    def _end_lease(self) -> None:
        """Hands the lease of an ended iteration to a newer Pipeline of the same rank:
        open batches are released and the rank leaves its instance, as close() does; this
        Pipeline then refuses to iterate or checkpoint (RuntimeError)."""
        _ENDED_ITERATIONS.discard(self)
        if self._detach():
            self._lease_ended = True

    def _detach(self) -> bool:
        """Releases the open batches and detaches the reader; whether one was attached."""
        for batch in self._open:
            batch.close()
        self._open = []
        if self._reader is None:
            return False
        self._reader.close()
        self._reader = None
        return True

    def __iter__(self) -> Generator[Batch, None, None]:
        """Batches of this rank (or, for a pipeline without batch and packer, one
        SampleRecord at a time, its arrays copied). A new iterator continues where the
        last one stopped. When an iteration ends (exhausted, or the iterator closed:
        ``it.close()``, ``del it``, a ``break`` out of a ``for``), the rank keeps its
        lease, and ``checkpoint()`` answers, until another Pipeline of this process
        attaches as the same rank with the same spec (same daemon, run_id, world_size,
        global_rank, DP identity and pipeline), which takes the lease over (upstream closes the engine with its
        iterator, so its tests build a fresh pipeline of the same rank after each
        iteration). This Pipeline then raises RuntimeError if iterated or checkpointed."""
        _ENDED_ITERATIONS.discard(self)
        finished = False
        try:
            for batch in self._batches():
                if self._yields_records():
                    record = batch._records(copy=True)[0]
                    batch.close()
                    # Typed as the batched case (Batch) so that typed callers index
                    # batches; a pipeline without batch/packer yields records.
                    yield record  # type: ignore[misc]
                else:
                    yield batch
            finished = True
        finally:
            # Normal end or close (GeneratorExit); an error leaves the lease as it is.
            if finished or sys.exc_info()[0] in (GeneratorExit, None):
                _ENDED_ITERATIONS.add(self)

    def _first_batch_progress(self) -> Optional[_progress.FirstBatchProgress]:
        """The stderr progress line for this Pipeline's first batch (progress.py), or
        None: not the first batch, progress=False, $ZEPHON_PROGRESS=0, or stderr is not
        a terminal."""
        if self._batches_taken or self._reader is not None or \
                not _progress.enabled(self._options.get("progress"), sys.stderr):
            return None
        daemon = self._options.get("daemon")
        return _progress.FirstBatchProgress(
            lambda: daemon_status(daemon, timeout_s=2.0), sys.stderr).start()

    def _batches(self) -> Iterator[Batch]:
        progress = self._first_batch_progress()
        try:
            yield from self._batches_after(progress)
        finally:
            if progress is not None:
                progress.stop(ok=False)  # the wait failed or was abandoned (no-op if done)

    def _batches_after(self, progress: Optional[_progress.FirstBatchProgress]) \
            -> Iterator[Batch]:
        reader = self._attach()
        timeout = float(self._options.get("read_timeout_s", 300))
        max_open = self._options.get("max_open_batches", 1)
        if isinstance(max_open, bool) or not isinstance(max_open, int) or max_open < 1:
            raise errors.InvalidOptionError(f"max_open_batches={max_open!r} is invalid: "
                                            "expected an int >= 1", errors.INVALID_ARGUMENT)
        slots = int(reader.reply.get("ring_slots", 0))
        if slots and max_open >= slots:
            raise errors.InvalidOptionError(
                f"max_open_batches={max_open} needs a ring with more than {max_open} slots but "
                f"this instance's ring has ring_slots={slots}; raise prefetch_batches",
                errors.INVALID_ARGUMENT)
        while True:
            if self._closed:
                raise RuntimeError("this Pipeline was closed while iterating")
            self._open = [b for b in self._open if not b.released]
            while len(self._open) >= max_open:
                self._open.pop(0).close()
            info = reader.info
            err = ctypes.c_void_p()
            mapping = reader.mapping  # held across the call: close() cannot free it under us
            code = _native.LIB.zephon_next(mapping.handle, timeout, ctypes.byref(info),
                                           ctypes.byref(err))
            del mapping
            if progress is not None:
                progress.stop(ok=code in (0, errors.OUT_OF_RANGE))
            if code == errors.OUT_OF_RANGE:
                _native.take_string(err)
                return
            _check(code, err)
            batch = Batch._from_native(reader, info)
            self._open.append(batch)
            self._batches_taken += 1
            yield batch

    def to_torch_dataset(self, transform: Optional[Callable[[Batch], Any]] = None) -> Any:
        """This rank's stream as a ``torch.utils.data.IterableDataset`` with
        ``state_dict()`` (the collective :meth:`checkpoint`) and ``load_state_dict()``
        (:meth:`restore`), the Stateful protocol of torchdata's StatefulDataLoader and
        torch.distributed.checkpoint: a trainer's checkpointer saves and restores the data
        state with the model. ``transform`` maps each batch (e.g.
        ``lambda b: b.to_training(return_labels=True)``). Use it with
        ``DataLoader(ds, batch_size=None, num_workers=0)``; see :mod:`zephon.torch_data`."""
        # Any: a torch IterableDataset subclass made on use (torch is optional) that also
        # has state_dict(), load_state_dict() and .pipeline; zephon.torch_data defines it.
        from .torch_data import make_dataset
        return make_dataset(self, transform)

    # ----- checkpoint / restore ---------------------------------------------------------
    def checkpoint(self) -> bytes:
        """Collective over the run's ``world_size`` Pipelines: every one must call it at the
        same training step. Blocks until the run's leader merged the round (written
        atomically under ``aggregate_dir/<run_id>/``) and returns the merged checkpoint,
        the same bytes for every caller. Records the batches this rank has taken from the
        iterator, never prefetched ones. Safe to call from several threads for several
        Pipelines of one process.

        Warns (RuntimeWarning, once per run) when the checkpoint was taken mid-window:
        the lanes stand at unequal batch counts because the run's global batch count is
        not a multiple of ``canonical_replicas``; see :func:`zephon.inspect_checkpoint`."""
        if self._reader is None and self._lease_ended:
            raise RuntimeError(
                "checkpoint(): this Pipeline's iteration ended and a newer Pipeline of the "
                "same rank in this process took its lease over; take checkpoint() before "
                "building that one (e.g. right after the last batch you train on)")
        reader = self._attach()
        data, size, err = ctypes.c_void_p(), ctypes.c_uint64(), ctypes.c_void_p()
        warning = ctypes.c_void_p()
        timeout = float(self._options.get("aggregate_timeout_s") or 180) + 30
        mapping = reader.mapping
        code = _native.LIB.zephon_checkpoint_noted(mapping.handle, timeout, ctypes.byref(data),
                                                   ctypes.byref(size), ctypes.byref(warning),
                                                   ctypes.byref(err))
        _check(code, err)
        try:
            state = ctypes.string_at(cast(int, data.value), size.value)
        finally:
            _native.LIB.zephon_free(data)
        message = _native.take_string(warning)
        if message:
            warnings.warn(message, RuntimeWarning, stacklevel=2)
        return state

    def restore(self, state: bytes) -> "Pipeline":
        """Resumes from a merged checkpoint (bytes from :meth:`checkpoint`) on this
        Pipeline's topology, which may differ from the saving run's as long as
        ``canonical_replicas`` allows it (left unset, it is taken from the checkpoint),
        and under this Pipeline's run_id (another run's checkpoint continues its stream;
        the lineage is recorded). Call before iterating. Returns self. Bytes that are not
        a checkpoint raise InvalidOptionError (a ValueError) here."""
        self._require_not_attached()
        if not isinstance(state, (bytes, bytearray, memoryview)) or len(state) == 0:
            raise TypeError("restore() needs the bytes returned by checkpoint()")
        # Checked now, as upstream's restore() does (trainers turn its ValueError into a
        # "malformed or incompatible" resume error): bytes that are not a checkpoint, a
        # damaged one or one of a newer format raise ValueError here, not at attach.
        from .checkpoints import _decode
        try:
            _decode(bytes(state))
        except ValueError as e:
            raise errors.InvalidOptionError(
                f"restore(): {str(e).removeprefix('inspect_checkpoint(): ')}",
                errors.INVALID_ARGUMENT) from None
        self._restore = bytes(state)
        return self

    def _state_before_start(self) -> bytes | None:
        """Where this Pipeline's stream starts, while it has taken no batch (attached or
        not: explain() and attach_info attach too): the bytes given to restore(), or b""
        (the beginning). None once it took one: only a collective checkpoint() can say
        where it stands then."""
        if self._batches_taken or self._lease_ended or self._closed:
            return None
        return self._restore if self._restore is not None else b""

    def _restore_nothing(self) -> None:
        """restore() of a state saved before any batch: start from the beginning."""
        self._require_not_attached()
        self._restore = None

    def _require_not_attached(self) -> None:
        if self._reader is not None:
            raise RuntimeError("restore() must be called before the Pipeline is iterated")

    # ----- introspection ---------------------------------------------------------------
    @property
    def attach_info(self) -> dict[str, Any]:
        """The daemon's AttachReply: instance_id, spec_hash, ring, owned_lanes, ..."""
        return dict(self._attach().reply)

    @property
    def released(self) -> int:
        """Batches this rank has released so far: every batch below this count was closed
        (a batch still on loan, or one closed ahead of an older open one, does not count)."""
        mapping = self._attach().mapping
        return int(_native.LIB.zephon_released(mapping.handle))

    @property
    def delivered(self) -> int:
        """Deprecated alias of :attr:`released` (same value); use ``released``."""
        warnings.warn("Pipeline.delivered is deprecated: use Pipeline.released (same value)",
                      DeprecationWarning, stacklevel=2)
        return self.released

    def explain(self) -> str:
        """The daemon's description of this rank's instance: stages, operators, queues,
        ring size, and node totals across all instances."""
        reader = self._attach()
        text = ctypes.c_void_p()
        err = ctypes.c_void_p()
        code = _native.LIB.zephon_explain(_native.encode(self._options.get("daemon")),
                                          _native.encode(reader.reply["instance_id"]), 10.0,
                                          ctypes.byref(text), ctypes.byref(err))
        _check(code, err)
        return _native.take_string(text)

    # ----- lifetime --------------------------------------------------------------------
    def close(self) -> None:
        """Releases the open batches, detaches this rank, unmaps its ring and closes its
        connection to the daemon, at once. Idempotent. Numpy arrays taken from batches
        keep the ring mapped (never the lease) until the last of them is dropped, so a
        stray array is never left pointing at unmapped memory."""
        self._detach()
        self._closed = True

    def __enter__(self) -> "Pipeline":
        return self

    def __del__(self) -> None:
        # A dropped Pipeline detaches cleanly (its peers must not see a crash) and frees
        # its ring mapping and connection like close().
        try:
            if self._reader is not None:
                self._reader.close()
        except Exception:  # interpreter shutdown
            pass

    def __exit__(self, *exc: object) -> None:
        self.close()


def daemon_status(daemon: str | None = None, timeout_s: float = 10.0) -> dict[str, Any]:
    """The node daemon's status (instances, readers, rings) as a dict."""
    out = ctypes.c_void_p()
    err = ctypes.c_void_p()
    code = _native.LIB.zephon_status(_native.encode(daemon), timeout_s, ctypes.byref(out),
                                     ctypes.byref(err))
    _check(code, err)
    status: dict[str, Any] = json.loads(_native.take_string(out))
    return status


def _check_parallelism(op: str, value: Any, required: bool = False) -> None:
    """Upstream's per-operator parallelism: None (unless required) or an int >= 1."""
    if value is None and not required:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise errors.InvalidOptionError(
            f"Pipeline.{op}: parallelism must be an int >= 1{'' if required else ' or None'}, "
            f"not {value!r}", errors.INVALID_ARGUMENT)


# Pipelines of this process whose iteration ended with their lease still held
# (Pipeline.__iter__): the next attach in this process ends those leases first.
_ENDED_ITERATIONS: "weakref.WeakSet[Pipeline]" = weakref.WeakSet()

# The packing operators; _PACKING stands for either in operator-order checks.
_PACKERS = frozenset(("pack_flat", "pack_sequences"))
_PACKING = "pack_flat"


def _add_packing_knobs(op: dict[str, Any], algorithm: str,
                       refuse: Callable[[str], NoReturn], *,
                       min_sequence_length: int | None, flush_strategy: str | None,
                       max_sequences_per_bin: int | None) -> None:
    """pack_flat's knobs into `op` (unset ones stay out, so the spec hash is unchanged)."""
    bins = algorithm in ("first_fit", "best_fit")
    if min_sequence_length is not None:
        if not bins:
            refuse(f"min_sequence_length applies to first_fit and best_fit, not {algorithm!r}")
        max_length = int(op["max_length"])
        if isinstance(min_sequence_length, bool) or not isinstance(min_sequence_length, int) \
                or not 1 <= min_sequence_length <= max_length:
            refuse(f"min_sequence_length must be an int in [1, max_length={max_length}], got "
                   f"{min_sequence_length!r}")
        op["min_sequence_length"] = str(min_sequence_length)
    if flush_strategy is not None:
        if not bins:
            refuse(f"flush_strategy applies to first_fit and best_fit, not {algorithm!r}")
        if flush_strategy not in ("fifo", "fullest"):
            refuse(f"flush_strategy={flush_strategy!r} is not one of fifo, fullest")
        op["flush_strategy"] = flush_strategy
    if max_sequences_per_bin is not None:
        if algorithm == "wrap":
            refuse("max_sequences_per_bin applies to first_fit, best_fit and best_fit_wrap, "
                   "not 'wrap' (which never pads)")
        if isinstance(max_sequences_per_bin, bool) or not isinstance(max_sequences_per_bin, int) \
                or not 1 <= max_sequences_per_bin < 2**32:
            refuse(f"max_sequences_per_bin must be an int >= 1, got {max_sequences_per_bin!r}")
        op["max_sequences_per_bin"] = max_sequences_per_bin
