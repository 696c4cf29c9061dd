"""Reading the bytes Pipeline.checkpoint() returns, offline (no daemon): what a user who
stores or compares data states needs to see in them."""
from __future__ import annotations

import ctypes
import json
from typing import Any

from . import _native

# Fields of proto/checkpoint.proto and proto/spec.proto that are 64-bit integers: their
# proto JSON form is a string, their dict form an int.
_INT64_FIELDS = frozenset({
    "round", "seed", "created_unix_ms", "total_batches", "next_batch_index",
    "flush_group_chunk", "records_into_group", "taken", "samples", "bytes",
    "canonical_replicas", "chunk_size", "flat_sample_tokens", "buffer_size", "max_length",
    "microbatch_size", "max_candidate_age", "checksum", "world_size", "global_rank",
    "dp_degree", "dp_group_id",
})
# Operator fields left out of the summary: inline tokenizer files (the spec names them
# by fingerprint, which is kept).
_BULKY_FIELDS = frozenset({"tokenizer_json", "tokenizer_config_json"})


def _plain(value: Any, key: str = "") -> Any:
    """Proto JSON -> plain Python: 64-bit integers as ints, nested messages as dicts."""
    if isinstance(value, dict):
        return {k: _plain(v, k) for k, v in value.items() if k not in _BULKY_FIELDS}
    if isinstance(value, list):
        return [_plain(v, key) for v in value]
    if key in _INT64_FIELDS and isinstance(value, str):
        return int(value)
    return value


def _decode(state: object) -> dict[str, Any]:
    if not isinstance(state, (bytes, bytearray, memoryview)):
        raise TypeError(f"inspect_checkpoint() needs the bytes checkpoint() returned, "
                         f"not {type(state).__name__}")
    data = bytes(state)
    if not data:
        raise ValueError("inspect_checkpoint(): the bytes are empty, not a Zephon checkpoint")
    out, err = ctypes.c_void_p(), ctypes.c_void_p()
    code = _native.LIB.zephon_inspect_checkpoint(data, len(data), ctypes.byref(out),
                                                 ctypes.byref(err))
    if code != 0:
        # Another file, a damaged or a newer checkpoint: the decoder's message says which.
        raise ValueError(f"inspect_checkpoint(): {_native.take_string(err)}")
    decoded: dict[str, Any] = json.loads(_native.take_string(out))
    return decoded


def _spec_summary(spec: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    ws = spec.get("work_source", {})
    weights = ws.get("weights", [])
    datasets = []
    for i, ds in enumerate(ws.get("datasets", [])):
        entry = {k: v for k, v in ds.items() if v not in ("", 0, None) or k == "name"}
        entry.setdefault("format", "")
        if i < len(weights):
            entry["weight"] = weights[i]
        datasets.append(entry)
    operators = []
    for op in spec.get("operators", []):
        for name, params in op.items():  # one member of the oneof is set
            operators.append({"op": name, **params})
    summary = {
        "datasets": datasets,
        "operators": operators,
        "seed": state.get("seed", 0),
        "canonical_replicas": state.get("canonical_replicas", 0),
    }
    for key in ("chunk_size", "exhausted_policy", "weight_by", "shuffle_shards",
                "shuffle_within_shard"):
        if key in ws:
            summary[key] = ws[key]
    for key in ("mapping_strategy", "lane_routing", "flush_every_k_chunks"):
        if key in spec:
            summary[key] = spec[key]
    return summary


def _schedule_history(raw: dict[str, Any]) -> list[dict[str, Any]]:
    """A curriculum's schedule revisions (CheckpointState.schedule_history): each
    ``from_chunk``, ``round`` (the restore that adopted it; 0 for the original),
    ``interpolate`` and ``schedule`` (``[(start, weights), ...]``, start as given: in
    samples or chunks, named by ``unit``)."""
    out = []
    for rev in raw.get("schedule_history", []):
        entries = []
        for e in rev.get("schedule", []):
            unit = "chunks" if "start_chunk" in e else "samples"
            entries.append({"start": int(e.get("start_chunk", e.get("start_sample", 0))),
                            "unit": unit, "weights": list(e.get("weights", []))})
        out.append({"from_chunk": int(rev.get("from_chunk", 0)),
                    "round": int(rev.get("round", 0)),
                    "interpolate": str(rev.get("interpolate", "STEP")).lower(),
                    "schedule": entries})
    return out


def inspect_checkpoint(state: bytes) -> dict[str, Any]:
    """Decodes the bytes :meth:`Pipeline.checkpoint` returned into a plain dict, without a
    daemon, checking them as a restore would (magic, format version, length, CRC-32).

    Keys: ``run_id``, ``round``, ``created_unix_ms``, ``spec_hash``, ``format_version``;
    the topology when saved: ``world_size``, ``dp_degree``, ``canonical_replicas`` (C),
    ``ranks`` (``global_rank``, ``dp_group_id``, ``taken``, ``daemon`` each); the data
    state: ``lanes`` (``lane``, ``next_batch_index``, ``flush_group_chunk``,
    ``records_into_group`` each, one per lane), ``total_batches``, ``mid_window`` (True
    when the lanes stand at unequal batch counts); ``spec``: a summary of the pipeline
    (``datasets`` with name, path, format and weight, ``operators`` in order with their
    parameters, ``seed``, ``canonical_replicas``, ``chunk_size``, ...); ``dataset_files``:
    per dataset, the shard count, samples and bytes recorded for restore's checks;
    ``schedule_history``: a curriculum's schedule revisions (empty until a resume changed
    its future), each ``from_chunk``, ``round``, ``interpolate`` and ``schedule``;
    ``lineage``: the runs this one continues, oldest first (``run_id`` and the ``round``
    restored), when a checkpoint was restored under another run_id.

    Raises ValueError naming the problem for bytes that are not a Zephon checkpoint (or
    a damaged one, or one of a newer format than this package reads), TypeError for
    something that is not bytes."""
    raw = _plain(_decode(state))
    lanes = [{"lane": lane.get("lane", 0),
              "next_batch_index": lane.get("next_batch_index", 0),
              "flush_group_chunk": lane.get("flush_group_chunk", 0),
              "records_into_group": lane.get("records_into_group", 0)}
             for lane in raw.get("lanes", [])]
    counts = {lane["next_batch_index"] for lane in lanes}
    return {
        "run_id": raw.get("run_id", ""),
        "round": raw.get("round", 0),
        "created_unix_ms": raw.get("created_unix_ms", 0),
        "spec_hash": raw.get("spec_hash", ""),
        "format_version": raw.get("format_version", 0),
        "world_size": raw.get("world_size", 0),
        "dp_degree": raw.get("dp_degree", 0),
        "canonical_replicas": raw.get("canonical_replicas", 0),
        "ranks": [{"global_rank": r.get("global_rank", 0),
                   "dp_group_id": r.get("dp_group_id", 0),
                   "taken": r.get("taken", 0),
                   "daemon": r.get("daemon", "")}
                  for r in raw.get("ranks", [])],
        "lanes": lanes,
        "total_batches": raw.get("total_batches", 0),
        "mid_window": len(counts) > 1,
        "spec": _spec_summary(raw.get("spec", {}), raw),
        "schedule_history": _schedule_history(raw),
        "lineage": [{"run_id": str(r.get("run_id", "")), "round": int(r.get("round", 0))}
                    for r in raw.get("lineage", [])],
        "dataset_files": [{"name": d.get("name", ""),
                           "shards": len(d.get("shards", [])),
                           "samples": sum(s.get("samples", 0) for s in d.get("shards", [])),
                           "bytes": sum(s.get("bytes", 0) for s in d.get("shards", []))}
                          for d in raw.get("datasets", [])],
    }
