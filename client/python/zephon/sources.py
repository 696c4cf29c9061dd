"""Datasets and work sources: pure descriptions, serialised into the pipeline spec.

Nothing here reads data: the daemon opens the files. These objects only validate their
arguments' types and build the spec the daemon hashes.
"""
from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING, Any, Callable, Mapping, Optional, Sequence, Tuple, Union, cast

from . import _spec_enums, errors

if TYPE_CHECKING:
    from ._in_memory import Shards

_FORMATS = ("megatron", "flat", "jsonl", "parquet", "mds")
# Formats whose records are converted once into the node's token cache from a column
# (or field) that may be null.
_RECORD_FORMATS = ("parquet", "mds")


def _invalid(message: str) -> errors.InvalidOptionError:
    return errors.InvalidOptionError(message, errors.INVALID_ARGUMENT)


def _require_int(name: str, value: Any, minimum: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if value < minimum:
        raise ValueError(f"{name}={value} is invalid: expected >= {minimum}")
    return value


def _check_loss_mask(name: str, fmt: str | None, field: Any,
                     fmt_name: Any) -> tuple[Optional[str], Optional[str]]:
    """Dataset's loss_mask_field / loss_mask_format, checked (unset stays None, so the
    spec and its hash stay as they were without a mask)."""
    if field is not None and (not isinstance(field, str) or not field):
        raise _invalid(f"Dataset {name!r}: loss_mask_field must be a non-empty string")
    if fmt_name is not None:
        try:
            _spec_enums.check("loss_mask_format", fmt_name)
        except ValueError as e:
            raise _invalid(f"Dataset {name!r}: {e}") from None
        if field is None:
            raise _invalid(f"Dataset {name!r}: loss_mask_format={fmt_name!r} needs "
                           "loss_mask_field (the field holding the mask)")
    if field is not None and fmt not in (None, "jsonl") + _RECORD_FORMATS:
        raise _invalid(f"Dataset {name!r}: loss_mask_field applies to JSONL, Parquet and MDS "
                       f"datasets of token ids, not fmt={fmt!r}; drop it")
    return field, fmt_name


class Dataset:
    """A named collection of shards in one format, at one path.

    ``fmt="megatron"``: ``path`` is a directory whose ``.bin``/``.idx`` pairs are the
    shards, or a single prefix (``path.bin`` + ``path.idx``). ``fmt="flat"``: raw token
    files (``dtype`` "uint16" or "uint32") cut into samples of ``sample_tokens`` tokens.
    ``fmt="jsonl"``: one JSON object per line (``.jsonl``, ``.jsonl.gz``, ``.jsonl.zst``)
    whose ``field`` holds the token ids. ``fmt="parquet"``: the ``*.parquet`` files of a
    directory (in name order) or a glob's matches, one sample per row; ``fmt="mds"``:
    MosaicML Streaming shards (a directory holding ``index.json``), one sample per
    sample. For both, ``field`` names the column of token ids (default ``"input_ids"``;
    a list of integers; dotted paths reach struct fields, ``"meta.ids"``), or, with
    ``Pipeline.tokenize(field=...)``, tokenize names the text column instead; each shard
    is converted once into the node's token cache. ``on_null``: ``"skip"`` (default)
    skips and counts null rows (``null_records`` in status, explain and /metrics),
    ``"error"`` fails naming the file and row. ``path`` may also be a glob. ``fmt=None``
    auto-detects. ``path`` may be an S3 URL, ``s3://bucket/prefix`` (a "directory", a glob
    or one object; zephond reads it with the AWS_* settings of its environment through its
    node-wide shard cache). ``max_repeats`` bounds the passes over this dataset after the first
    one under ``exhausted_policy="repeat"``.

    SFT loss masks (JSONL, Parquet and MDS datasets of token ids): ``loss_mask_field``
    names each record's mask field or column, either a list of 0/1 aligned with the token
    list (``loss_mask_format="values"``, the default; its length must equal the tokens')
    or, with ``loss_mask_format="spans"``, the ``[start, end)`` token ranges that are
    trained on (JSONL: ``[[0, 3], [7, 9]]``; a Parquet/MDS integer list holds them flat,
    ``[0, 3, 7, 9]``). Batches of a
    pipeline with a mask carry ``loss_mask`` (uint8 [B, L]) and
    :meth:`Batch.to_training` applies it to the labels. Text datasets are masked by
    field instead: ``Pipeline.tokenize(field=[...], loss_on=[...])``.
    """

    def __init__(self, name: str, path: str | os.PathLike[str], fmt: str | None = None,
                 dtype: str | None = None, sample_tokens: int | None = None,
                 field: str | None = None, max_repeats: int | None = None,
                 on_null: str | None = None, loss_mask_field: str | None = None,
                 loss_mask_format: str | None = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError("Dataset name must be a non-empty string")
        if fmt is not None and fmt not in _FORMATS:
            raise _invalid(f"Dataset {name!r}: fmt={fmt!r} is not supported; use one of "
                           f"{', '.join(_FORMATS)} (or None to auto-detect)")
        if on_null is not None:
            try:
                _spec_enums.check("on_null", on_null)
            except ValueError as e:
                raise _invalid(f"Dataset {name!r}: {e}") from None
            if fmt is not None and fmt not in _RECORD_FORMATS:
                raise _invalid(f"Dataset {name!r}: on_null={on_null!r} applies to record "
                               f"formats ({', '.join(_RECORD_FORMATS)}), not fmt={fmt!r}, "
                               "whose records are never null; drop on_null")
        if dtype is not None and dtype not in ("uint16", "uint32"):
            raise ValueError(f"Dataset {name!r}: dtype={dtype!r} is not supported; use "
                             "'uint16' or 'uint32'")
        self.name = name
        path = os.fspath(path)
        # Object-store URLs ("s3://bucket/prefix") go to the daemon as written.
        self.path = path if "://" in path else os.path.abspath(path)
        self.fmt = fmt
        self.dtype = dtype
        self.sample_tokens = (None if sample_tokens is None
                              else _require_int("sample_tokens", sample_tokens, 1))
        if field is not None and (not isinstance(field, str) or not field):
            raise ValueError(f"Dataset {name!r}: field must be a non-empty string")
        self.field = field
        self.max_repeats = (None if max_repeats is None
                            else _require_int("max_repeats", max_repeats, 0))
        self.on_null = on_null
        self.loss_mask_field, self.loss_mask_format = _check_loss_mask(
            name, fmt, loss_mask_field, loss_mask_format)

    @classmethod
    def from_path(cls, name: str, path: str | os.PathLike[str], fmt: str | None = None,
                  **kwargs: Any) -> "Dataset":
        return cls(name, path, fmt=fmt, **kwargs)

    @classmethod
    def from_dict(cls, name: str, shards: Shards, **kwargs: Any) -> "Dataset":
        """An in-memory dataset (upstream's spelling): ``shards`` is ``{key:
        InMemoryShard(rows)}`` (in key order) or a list of shards, each row a dict, e.g.
        ``{"text": ...}`` for ``tokenize`` or ``{"input_ids": [...]}`` with
        ``field="input_ids"``. The rows are written to a private JSONL directory that
        zephond reads (zephon/_in_memory.py: where, the size bound, and its removal when
        this Dataset is collected); other keyword arguments are Dataset's."""
        from . import _in_memory
        if "fmt" in kwargs and kwargs["fmt"] not in (None, "jsonl"):
            raise _invalid(f"Dataset.from_dict({name!r}): in-memory rows are JSONL; drop fmt")
        kwargs.pop("fmt", None)
        root = _in_memory.write_shards(name, shards)
        try:
            ds = cls(name, root, fmt="jsonl", **kwargs)
        except BaseException:
            import shutil
            shutil.rmtree(root, ignore_errors=True)
            raise
        _in_memory.own(ds, root)
        return ds

    def __getstate__(self) -> dict[str, Any]:
        # A copy in another process reads the files; only the creator removes them.
        state = dict(self.__dict__)
        state.pop("_in_memory_finalizer", None)
        return state

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"name": self.name, "path": self.path}
        if self.fmt:
            spec["format"] = self.fmt
        if self.dtype:
            spec["dtype"] = self.dtype
        if self.sample_tokens:
            spec["flat_sample_tokens"] = self.sample_tokens
        if self.field:
            # Record formats read `field`; JSONL (and auto-detection) keep jsonl_field,
            # so existing pipelines' spec hashes stay as they were.
            spec["field" if self.fmt in _RECORD_FORMATS else "jsonl_field"] = self.field
        if self.on_null is not None:
            spec["on_null"] = _spec_enums.to_proto("on_null", self.on_null)
        if self.max_repeats is not None:
            spec["max_repeats"] = self.max_repeats
        if self.loss_mask_field is not None:
            spec["loss_mask_field"] = self.loss_mask_field
        if self.loss_mask_format is not None:
            spec["loss_mask_format"] = _spec_enums.to_proto("loss_mask_format",
                                                            self.loss_mask_format)
        return spec

    def __repr__(self) -> str:
        return f"Dataset({self.name!r}, {self.path!r}, fmt={self.fmt!r})"


def _check_policy(key: str, value: Any) -> str:
    try:
        return _spec_enums.check("exhausted_policy", value)
    except ValueError as e:
        raise ValueError(str(e).replace("exhausted_policy=", f"{key}=", 1)) from None


def _check_bool(key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{key} must be a bool, got {type(value).__name__} ({value!r})")
    return value


def _per_dataset(option: str, value: Any, names: list[str], check: Callable[[str, Any], Any],
                 plain: type) -> dict[str, Any]:
    """``{dataset_name: checked value}`` when ``value`` is a mapping, {} otherwise.

    A mapping naming a dataset the work source does not have is refused, naming it."""
    if not isinstance(value, Mapping):
        return {}
    unknown = sorted(set(value) - set(names))
    if unknown:
        raise ValueError(f"{option} names unknown datasets {unknown}; datasets are {names}")
    return {name: check(f"{option}[{name!r}]", v) for name, v in value.items()}


class MixtureSpec:
    """Upstream's mixture object: ``{dataset_name: weight}`` (relative weights > 0).
    ``StaticMixtureWorkSource(mixture=MixtureSpec({...}))`` is the same work source as
    ``mixture={...}``."""

    def __init__(self, weights: Mapping[str, float]) -> None:
        if not isinstance(weights, Mapping) or not weights:
            raise ValueError("MixtureSpec needs a non-empty {dataset_name: weight} mapping")
        for name, w in weights.items():
            if isinstance(w, bool) or not isinstance(w, (int, float)) or \
                    not (math.isfinite(w) and w > 0):
                raise ValueError(f"MixtureSpec weight of {name!r} is {w!r}: weights must be "
                                 "finite numbers > 0")
        self.weights = dict(weights)

    @property
    def normalized(self) -> dict[str, float]:
        total = sum(self.weights.values())
        return {k: v / total for k, v in self.weights.items()}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, MixtureSpec) and self.weights == other.weights

    def __repr__(self) -> str:
        return f"MixtureSpec({self.weights!r})"


class TokenEstimation:
    """Upstream's marker for token-share weights: ``token_estimation=TokenEstimation()`` is
    ``weight_by="tokens"`` (zephond measures tokens per sample with its own deterministic
    rule, see StaticMixtureWorkSource)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TokenEstimation)

    def __repr__(self) -> str:
        return "TokenEstimation()"


class StaticMixtureWorkSource:
    """A fixed set of datasets mixed at fixed weights, cut into chunks of sample pointers.

    ``mixture``: ``{dataset_name: weight}`` or a list of weights in dataset order
    (relative; default: proportional to dataset sizes). The dataset list order is part of
    the data identity.

    ``weight_by``: what the weights are proportions of. ``"samples"`` (default): of the
    drawn samples. ``"tokens"``: of the drawn tokens (upstream's ``TokenEstimation``).
    zephond measures each dataset's tokens per sample deterministically (the mean sample
    length over up to 4096 samples at evenly spaced positions across its shards; exact for
    smaller datasets) and draws dataset k with sample weight ``weight_k / tokens_per_sample_k``,
    so every rank and every resume allocates identically; the estimates are stored in the
    checkpoint and a restore that measures other values is refused, naming the dataset.
    ``explain()`` shows them. Without ``mixture``, ``"tokens"`` weighs each dataset by its
    estimated total tokens, which draws exactly as ``"samples"`` does. A dataset whose
    measured samples hold no token is refused.

    Repetition (upstream semantics): ``exhausted_policy`` (``"stop_after_passes"``,
    ``"repeat"``, ``"stop"``), ``stop_after_passes``, ``max_repeats`` and
    ``reshuffle_on_repeat`` each take one value or a ``{dataset_name: value}`` map; a
    dataset a map leaves out keeps the plain default. A dataset given its own
    ``stop_after_passes`` uses that policy. The stream ends at the earliest end any
    ``"stop"`` or bounded ``"repeat"`` dataset imposes, and otherwise once every
    ``"stop_after_passes"`` dataset finished its passes; ``"repeat"`` datasets without
    ``max_repeats`` are fillers that never end it. ``stop_after_passes`` with ``"stop"``
    or with ``max_repeats`` on one dataset is refused by zephond, naming it.
    ``reshuffle_on_repeat=False`` replays the first pass's order in every pass
    (default True: each pass reshuffles).

    Upstream's spellings are accepted: ``mixture=MixtureSpec({...})``,
    ``token_estimation=TokenEstimation()`` (= ``weight_by="tokens"``; None = samples) and
    ``exhausted_policy=None`` (the default, ``"stop_after_passes"``).
    """

    def __init__(self, datasets: Sequence[Dataset], mixture: Mapping[str, float] |
                 Sequence[float] | MixtureSpec | None = None, seed: int = 0,
                 chunk_size: int = 1024,
                 shuffle_shards: bool = True, shuffle_within_shard: bool = False,
                 shuffle_block_size: int | str | None = None,
                 exhausted_policy: str | Mapping[str, str] | None = "stop_after_passes",
                 stop_after_passes: int | Mapping[str, int] = 1,
                 max_repeats: int | Mapping[str, int] | None = None,
                 weight_by: str = "samples",
                 reshuffle_on_repeat: bool | Mapping[str, bool] = True,
                 token_estimation: TokenEstimation | None = None) -> None:
        if isinstance(mixture, MixtureSpec):
            mixture = mixture.weights
        if exhausted_policy is None:
            exhausted_policy = "stop_after_passes"
        if token_estimation is not None:
            if not isinstance(token_estimation, TokenEstimation):
                raise TypeError("token_estimation must be a zephon.work.TokenEstimation or "
                                f"None, got {type(token_estimation).__name__}")
            if weight_by != "samples":
                raise ValueError("token_estimation=TokenEstimation() is weight_by='tokens'; "
                                 f"do not also pass weight_by={weight_by!r}")
            weight_by = "tokens"
        datasets = list(datasets)
        if not datasets or not all(isinstance(d, Dataset) for d in datasets):
            raise TypeError("StaticMixtureWorkSource needs a non-empty list of zephon.Dataset")
        names = [d.name for d in datasets]
        if len(set(names)) != len(names):
            raise ValueError(f"dataset names must be unique, got {names}")
        weights: list[float] = []
        if isinstance(mixture, Mapping):
            unknown = set(mixture) - set(names)
            if unknown:
                raise ValueError(f"mixture names unknown datasets {sorted(unknown)}; "
                                 f"datasets are {names}")
            missing = [n for n in names if n not in mixture]
            if missing:
                raise ValueError(f"mixture has no weight for datasets {missing}")
            weights = [float(mixture[n]) for n in names]
        elif mixture is not None:
            weights = [float(w) for w in mixture]
            if len(weights) != len(datasets):
                raise ValueError(f"mixture has {len(weights)} weights for {len(datasets)} "
                                 "datasets")
        for name, w in zip(names, weights):
            # NaN and inf are not JSON: the daemon would see a parse error naming nothing.
            if not (math.isfinite(w) and w > 0):
                raise ValueError(f"mixture weight of dataset {name!r} is {w}: weights must be "
                                 "finite numbers > 0")
        # Per-dataset maps ({dataset_name: value}) of the repetition options; a plain
        # value is the work source's default (daemon/pipeline/ordering/repetition.h).
        self.dataset_policies = _per_dataset("exhausted_policy", exhausted_policy, names,
                                             _check_policy, str)
        if isinstance(exhausted_policy, Mapping):
            exhausted_policy = "stop_after_passes"
        self.dataset_passes = _per_dataset(
            "stop_after_passes", stop_after_passes, names,
            lambda key, v: _require_int(key, v, 1), int)
        if isinstance(stop_after_passes, Mapping):
            stop_after_passes = 1
        self.dataset_reshuffle = _per_dataset("reshuffle_on_repeat", reshuffle_on_repeat, names,
                                              _check_bool, bool)
        self.reshuffle_on_repeat = (True if isinstance(reshuffle_on_repeat, Mapping)
                                    else _check_bool("reshuffle_on_repeat", reshuffle_on_repeat))
        _spec_enums.check("exhausted_policy", exhausted_policy)
        _spec_enums.check("weight_by", weight_by)
        self.datasets = datasets
        self.weights = weights
        self.seed = _require_int("seed", seed)
        self.chunk_size = _require_int("chunk_size", chunk_size, 1)
        self.shuffle_shards = bool(shuffle_shards)
        self.shuffle_within_shard = bool(shuffle_within_shard)
        self.exhausted_policy = exhausted_policy
        self.weight_by = weight_by
        self.stop_after_passes = _require_int("stop_after_passes", stop_after_passes, 1)
        if shuffle_block_size is None:
            self.shuffle_block_size = ""
        elif shuffle_block_size in ("auto", "global"):
            self.shuffle_block_size = cast(str, shuffle_block_size)
        else:
            self.shuffle_block_size = str(_require_int("shuffle_block_size",
                                                       shuffle_block_size, 1))
        # Per-dataset bound on repeats; overrides Dataset(max_repeats=...) for this source.
        self.max_repeats: dict[str, int] = {}
        if max_repeats is not None:
            per_dataset = (max_repeats if isinstance(max_repeats, Mapping)
                           else {d.name: max_repeats for d in datasets})
            unknown = set(per_dataset) - set(names)
            if unknown:
                raise ValueError(f"max_repeats names unknown datasets {sorted(unknown)}")
            self.max_repeats = {name: _require_int(f"max_repeats[{name!r}]", value, 0)
                                for name, value in per_dataset.items()}

    def _dataset_spec(self, d: Dataset) -> dict[str, Any]:
        spec = d.to_spec()
        if d.name in self.max_repeats:
            spec["max_repeats"] = self.max_repeats[d.name]
        # Only what a map named: an unnamed dataset inherits, and a spec without maps
        # hashes as before they existed.
        if d.name in self.dataset_policies:
            spec["exhausted_policy"] = _spec_enums.to_proto("exhausted_policy",
                                                            self.dataset_policies[d.name])
        if d.name in self.dataset_passes:
            spec["stop_after_passes"] = self.dataset_passes[d.name]
        if d.name in self.dataset_reshuffle:
            spec["reshuffle_on_repeat"] = self.dataset_reshuffle[d.name]
        return spec

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "datasets": [self._dataset_spec(d) for d in self.datasets],
            "weights": self.weights,
            "seed": str(self.seed),
            "chunk_size": str(self.chunk_size),
            "shuffle_shards": self.shuffle_shards,
            "shuffle_within_shard": self.shuffle_within_shard,
            "exhausted_policy": _spec_enums.to_proto("exhausted_policy",
                                                     self.exhausted_policy),
            "stop_after_passes": self.stop_after_passes,
            "shuffle_block_size": self.shuffle_block_size,
        }
        # Only when not the default: "samples" is zephond's default, and a spec that
        # leaves it out is the spec every earlier client sent.
        if self.weight_by != "samples":
            spec["weight_by"] = _spec_enums.to_proto("weight_by", self.weight_by)
        if not self.reshuffle_on_repeat:
            spec["reshuffle_on_repeat"] = False
        return spec


# One entry of ScheduledMixtureWorkSource's schedule: (boundary, weights), the weights a
# {dataset_name: weight} map or a list in dataset order.
_ScheduleEntry = Tuple[int, Union[Mapping[str, float], Sequence[float]]]


class ScheduledMixtureWorkSource(StaticMixtureWorkSource):
    """A data curriculum: the mixture weights change with training progress.

    ``schedule``: ``[(0, w0), (b1, w1), ...]``, each ``w`` a ``{dataset_name: weight}`` map
    (a dataset it leaves out gets weight 0: it draws nothing in that phase) or a list of
    weights in dataset order; weights are relative, >= 0, at least one > 0 per entry.
    Boundaries ``b`` are in samples (``unit="samples"``, the default) or global chunks
    (``unit="chunks"``), the first 0, strictly increasing. zephond makes the weights a pure
    function of the global chunk index g, so every rank, every ``dp_degree`` and every
    resume sees the same curriculum: a boundary of ``b`` samples becomes chunk
    ``ceil(b / chunk_size)`` (the phase starts at most ``chunk_size - 1`` samples late,
    never early; it is exact in chunks). To start a phase at training step S with a
    global batch of B rows: without packing each row is one sample, so ``b = S * B``;
    with ``pack_flat`` a row holds ``max_length`` tokens of several samples, so
    ``b ~= S * B * max_length / mean_tokens_per_sample`` is approximate (give chunks for
    an exact chunk boundary).

    ``interpolate="step"``: each entry's weights hold until the next entry;
    ``"linear"``: chunk by chunk linearly from one entry's weights to the next's
    (constant after the last). Every other argument is StaticMixtureWorkSource's
    (``weight_by="samples"`` only). A scheduled chunk holds ``chunk_size`` samples give
    or take (number of datasets - 1): the per-dataset counts are floors of the exact
    cumulative shares, which is what makes any chunk computable without replay.

    On resume from a checkpoint the schedule's future (entries starting after the
    chunks the checkpoint had already started) may change: the change is recorded in
    the checkpoint's ``schedule_history``; changing its past is refused, naming the entry.
    """

    def __init__(self, datasets: Sequence[Dataset], schedule: Sequence[_ScheduleEntry],
                 interpolate: str = "step", unit: str = "samples", **options: Any) -> None:
        for name in ("mixture", "weight_by"):
            if name in options and not (name == "weight_by" and options[name] == "samples"):
                raise ValueError(f"ScheduledMixtureWorkSource takes no {name}=: its weights "
                                 "are the schedule's entries (sample shares)")
        super().__init__(datasets, **options)
        _spec_enums.check("interpolate", interpolate)
        if unit not in ("samples", "chunks"):
            raise ValueError(f"unit={unit!r} is not supported; use 'samples' or 'chunks'")
        names = [d.name for d in self.datasets]
        entries = list(schedule)
        if not entries:
            raise ValueError("schedule is empty: give at least [(0, weights)]")
        self.schedule: list[tuple[int, list[float]]] = []
        for i, entry in enumerate(entries):
            if not isinstance(entry, (tuple, list)) or len(entry) != 2:
                raise TypeError(f"schedule[{i}] must be a (boundary, weights) pair, got "
                                f"{entry!r}")
            boundary = _require_int(f"schedule[{i}] boundary", entry[0])
            if i == 0 and boundary != 0:
                raise ValueError(f"schedule[0] starts at {boundary}: the first entry must "
                                 "start at 0")
            if i > 0 and boundary <= self.schedule[-1][0]:
                raise ValueError(f"schedule[{i}] starts at {boundary}, not after "
                                 f"schedule[{i - 1}]'s {self.schedule[-1][0]}: boundaries "
                                 "must strictly increase")
            self.schedule.append((boundary, self._entry_weights(i, entry[1], names)))
        if self.chunk_size < len(names):
            raise ValueError(f"chunk_size={self.chunk_size} is smaller than the {len(names)} "
                             "datasets: a scheduled chunk holds chunk_size +- (datasets - 1) "
                             f"samples, so a chunk could be empty; use chunk_size >= {len(names)}")
        if unit == "samples":
            # zephond starts each phase at chunk ceil(boundary / chunk_size): two entries
            # falling into one chunk are refused there, so here too.
            chunks = [-(-b // self.chunk_size) for b, _ in self.schedule]
            for i in range(1, len(chunks)):
                if chunks[i] <= chunks[i - 1]:
                    raise ValueError(
                        f"schedule[{i}] (sample {self.schedule[i][0]}) starts in the same "
                        f"chunk {chunks[i]} as schedule[{i - 1}] (chunk_size="
                        f"{self.chunk_size}): phases start at chunk ceil(boundary / "
                        "chunk_size); space the boundaries at least one chunk apart")
        self.interpolate = interpolate
        self.unit = unit

    @staticmethod
    def _entry_weights(i: int, weights: Any, names: list[str]) -> list[float]:
        if isinstance(weights, Mapping):
            unknown = sorted(set(weights) - set(names))
            if unknown:
                raise ValueError(f"schedule[{i}] names unknown datasets {unknown}; datasets "
                                 f"are {names}")
            out = [float(weights.get(n, 0.0)) for n in names]
        else:
            out = [float(w) for w in weights]
            if len(out) != len(names):
                raise ValueError(f"schedule[{i}] has {len(out)} weights for {len(names)} "
                                 "datasets")
        for name, w in zip(names, out):
            if not (math.isfinite(w) and w >= 0):
                raise ValueError(f"schedule[{i}] weight of dataset {name!r} is {w}: weights "
                                 "must be finite numbers >= 0")
        if not any(w > 0 for w in out):
            raise ValueError(f"schedule[{i}] gives every dataset weight 0: at least one "
                             "must be > 0")
        return out

    def to_spec(self) -> dict[str, Any]:
        spec = super().to_spec()
        del spec["weights"]
        key = "start_sample" if self.unit == "samples" else "start_chunk"
        spec["schedule"] = [{key: str(b), "weights": w} for b, w in self.schedule]
        spec["interpolate"] = _spec_enums.to_proto("interpolate", self.interpolate)
        return spec
