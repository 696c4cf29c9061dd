"""Upstream's ``zephon.io`` import path: datasets and the I/O options.

``Dataset`` is :class:`zephon.Dataset` (``Dataset.from_dict(name, {0: InMemoryShard(rows)})``
for in-memory rows). ``CacheOptions`` / ``StoreOptions`` are accepted
where upstream takes them (``Pipeline.options(io_options=...)``) and validated, but the
node's caches are zephond's (``--cache-dir``, ``--token-cache-bytes``, ``--shard-cache-*``),
configured once per node, not per pipeline: see the README's "Coming from the Python
Zephon" section.
"""
from __future__ import annotations

from .._in_memory import InMemoryShard
from ..sources import Dataset
from .options import CacheOptions, StoreOptions

__all__ = ["CacheOptions", "Dataset", "InMemoryShard", "StoreOptions"]
