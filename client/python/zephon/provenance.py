"""Which documents were in a global step: :func:`which`, computed by the engine from a
pipeline's spec or a checkpoint, without a daemon or a run (``zephonctl which``)."""
from __future__ import annotations

import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Optional, Union

from . import _native, errors


def _zephonctl() -> str:
    """The zephonctl binary next to the native library (the wheel and `make build`
    install it there), or $ZEPHONCTL."""
    env = os.environ.get("ZEPHONCTL")
    path = Path(env) if env else Path(_native.library_path()).with_name("zephonctl")
    if not path.is_file():
        raise errors.NotFoundError(
            f"zephonctl not found at {path}: run `make build` (or install the wheel), or set "
            "ZEPHONCTL to the binary", errors.NOT_FOUND)
    return str(path)


def which(spec_or_state: Any, step: Optional[int] = None, *,
          sample: Union[str, tuple[Any, Any, int], None] = None,
          global_batches: Optional[int] = None, dp_degree: Optional[int] = None,
          tokens: bool = False, text: Union[str, os.PathLike[str], None] = None,
          passes: Optional[int] = None,
          timeout_s: float = 600.0) -> dict[str, Any]:
    """The samples of global step ``step`` (from 0): for each of its micro-batches the DP
    group that received it (``dp_group``, ``batch_in_step``), the ``lane`` and
    ``lane_batch`` it came from, and its ``segments``: row, ``dataset`` (name),
    ``file``, ``doc`` (index in the file), ``token_start``/``token_end`` (and
    ``tokens`` with ``tokens=True``, ``text`` with ``text=`` a tokenizer's path);
    padding segments carry ``padding`` (cells).

    ``spec_or_state`` is a :class:`~zephon.Pipeline` (its spec), checkpoint bytes (from
    :meth:`~zephon.Pipeline.checkpoint`), or the path of a checkpoint file or spec JSON.
    ``global_batches`` (micro-batches per step, a multiple of canonical_replicas) defaults
    to canonical_replicas; ``dp_degree`` to the checkpoint's, else 1.
    Raises InvalidOptionError for a bad step shape or a step past the stream's end.

    With ``sample=`` instead of ``step`` it answers the inverse question: every delivery
    of that document (``"web/part-00.bin/123"`` or a ``(dataset, shard, doc)`` tuple of
    names or numbers, e.g. a :class:`~zephon.SampleId`) as ``occurrences``: ``pass``,
    ``step``, ``dp_group``, ``batch_in_step``, ``lane``, ``lane_batch`` and its
    ``pieces`` (row, token range); ``passes`` bounds the passes followed (default: all of
    a finite stream, 10 of an endless one)."""
    if (step is None) == (sample is None):
        raise TypeError("which() takes step= or sample=, one of them")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise errors.InvalidOptionError(f"step={step!r} is invalid: expected an int >= 0",
                                        errors.INVALID_ARGUMENT)
    with tempfile.TemporaryDirectory(prefix="zephon-which-") as tmp:
        path: Union[str, os.PathLike[str]]
        if hasattr(spec_or_state, "_request"):
            path = Path(tmp) / "request.json"
            path.write_text(json.dumps(spec_or_state._request()))
        elif isinstance(spec_or_state, (bytes, bytearray)):
            path = Path(tmp) / "checkpoint.bin"
            path.write_bytes(bytes(spec_or_state))
        elif isinstance(spec_or_state, (str, os.PathLike)):
            path = spec_or_state
        else:
            raise TypeError("which() takes a Pipeline, checkpoint bytes or a file path, not "
                            f"{type(spec_or_state).__name__}")
        argv = [_zephonctl(), "which", "--spec", os.fspath(path), "--json"]
        if step is not None:
            argv += ["--step", str(step)]
        elif sample is not None:
            named = sample if isinstance(sample, str) else "/".join(str(x) for x in sample)
            argv += ["--sample", named]
            if passes is not None:
                argv += ["--passes", str(passes)]
        if global_batches is not None:
            argv += ["--global-batches", str(global_batches)]
        if dp_degree is not None:
            argv += ["--dp-degree", str(dp_degree)]
        if tokens:
            argv.append("--tokens")
        if text is not None:
            argv += ["--text", os.fspath(text)]
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            raise errors.ZephonTimeoutError(
                f"zephonctl which did not answer within {timeout_s} s (a far step of a large "
                "run counts every document before it: ask from a checkpoint, or raise "
                "timeout_s)", errors.DEADLINE_EXCEEDED) from None
    if out.returncode != 0:
        message = out.stderr.strip().removeprefix("zephonctl which: ")
        if out.returncode == 2:
            raise errors.InvalidOptionError(message, errors.INVALID_ARGUMENT)
        raise errors.PipelineError(message, errors.INTERNAL)
    answer: dict[str, Any] = json.loads(out.stdout)
    return answer
