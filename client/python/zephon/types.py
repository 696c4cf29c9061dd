"""Upstream's ``zephon.types`` import path for what iteration yields.

``SampleBatch`` is :class:`zephon.Batch` (a packed batch: named tensors viewed in shared
memory, ``ids``, ``to_training``); ``SampleId`` names a sample. Pipelines without
``pack_flat`` (upstream's record batches, ``SampleRecord``) are not served yet: see the
README's "Coming from the Python Zephon".
"""
from __future__ import annotations

from .batch import Batch as SampleBatch
from .batch import SampleId

__all__ = ["SampleBatch", "SampleId"]
