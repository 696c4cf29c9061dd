"""In-memory datasets (upstream's ``Dataset.from_dict`` and ``InMemoryShard``): rows held by
the trainer process, written by this client to a private JSONL shard directory that
zephond reads like any JSONL dataset.

The directory is a fresh ``zephon-in-memory-*`` directory (mode 0700: zephond must run as
this user, or root, to read it) under ``$ZEPHON_IN_MEMORY_DIR`` when set (a mount zephond
also sees, when it runs in another container), else under the temporary directory. It
is removed when the Dataset that owns it is garbage-collected or the process exits, by
the process that wrote it only: a Dataset pickled into another process (a spawned
rank) or inherited by a forked child reads the same files and never removes them. Rows
are JSON objects (str, int, float, bool, None, lists and dicts of them); the shards of
one dataset may hold at most ``ZEPHON_IN_MEMORY_MAX_BYTES`` (default 1 GiB) of JSON:
larger data belongs in files.
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import weakref
from typing import Any, Mapping, Sequence, Union

from . import errors

DEFAULT_MAX_BYTES = 1 << 30


def _invalid(message: str) -> errors.InvalidOptionError:
    return errors.InvalidOptionError(message, errors.INVALID_ARGUMENT)


class InMemoryShard:
    """One shard of an in-memory dataset: a sequence of rows (dicts), in order."""

    def __init__(self, rows: Sequence[Mapping[str, Any]]) -> None:
        if isinstance(rows, (str, bytes)) or not isinstance(rows, Sequence):
            raise TypeError("InMemoryShard takes a sequence of rows (dicts), not "
                            f"{type(rows).__name__}")
        for i, row in enumerate(rows):
            if not isinstance(row, Mapping):
                raise TypeError(f"InMemoryShard row {i} is a {type(row).__name__}, not a dict")
        self.rows = list(rows)

    def __len__(self) -> int:
        return len(self.rows)


# Dataset.from_dict's shards: {key: shard} (in key order) or a sequence of shards, each
# an InMemoryShard or its rows.
_Shard = Union["InMemoryShard", Sequence[Mapping[str, Any]]]
Shards = Union[Mapping[Any, _Shard], Sequence[_Shard]]


def _max_bytes() -> int:
    value = os.environ.get("ZEPHON_IN_MEMORY_MAX_BYTES", "")
    return int(value) if value.isdigit() else DEFAULT_MAX_BYTES


def write_shards(name: str, shards: Shards) -> str:
    """Writes `shards` ({key: InMemoryShard} in key order, or a sequence) as JSONL files
    part-00000.jsonl, ... into a new private directory; returns it."""
    if isinstance(shards, Mapping):
        try:
            ordered = [shards[k] for k in sorted(shards)]
        except TypeError:
            raise TypeError(f"Dataset.from_dict({name!r}): shard keys must sort (ints or "
                            "strs)") from None
    elif isinstance(shards, Sequence) and not isinstance(shards, (str, bytes)):
        ordered = list(shards)
    else:
        raise TypeError(f"Dataset.from_dict({name!r}): shards must be a {{key: InMemoryShard}} "
                        f"mapping or a list of InMemoryShard, not {type(shards).__name__}")
    if not ordered:
        raise _invalid(f"Dataset.from_dict({name!r}): no shards")
    shards_list = [s if isinstance(s, InMemoryShard) else InMemoryShard(s) for s in ordered]
    base = os.environ.get("ZEPHON_IN_MEMORY_DIR") or None
    if base:
        os.makedirs(base, mode=0o700, exist_ok=True)
    root = os.path.abspath(tempfile.mkdtemp(prefix="zephon-in-memory-", dir=base))
    limit, written = _max_bytes(), 0
    try:
        for k, shard in enumerate(shards_list):
            path = os.path.join(root, f"part-{k:05d}.jsonl")
            with open(path, "w", encoding="utf-8") as f:
                for i, row in enumerate(shard.rows):
                    try:
                        line = json.dumps(row, ensure_ascii=False, allow_nan=False)
                    except (TypeError, ValueError) as e:
                        raise _invalid(f"Dataset.from_dict({name!r}): shard {k} row {i} is not "
                                       f"JSON ({e}); rows hold str, numbers, bools, None, "
                                       "lists and dicts") from None
                    written += len(line.encode("utf-8")) + 1
                    if written > limit:
                        raise _invalid(
                            f"Dataset.from_dict({name!r}): the rows exceed {limit} bytes of "
                            "JSON (ZEPHON_IN_MEMORY_MAX_BYTES): write them to files and use "
                            "Dataset.from_path")
                    f.write(line)
                    f.write("\n")
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return root


def _remove_if_creator(root: str, creator_pid: int) -> None:
    # A forked child inherits the finalizer: only the writing process removes the files.
    if os.getpid() == creator_pid:
        shutil.rmtree(root, ignore_errors=True)


def own(dataset: Any, root: str) -> None:
    """Removes `root` when `dataset` is collected or at exit (whichever comes first), in
    this process only."""
    dataset._in_memory_finalizer = weakref.finalize(dataset, _remove_if_creator, root,
                                                    os.getpid())
