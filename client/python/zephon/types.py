"""Upstream's ``zephon.types`` import path for what iteration yields.

``SampleBatch`` is :class:`zephon.Batch`: a packed batch (named tensors viewed in shared
memory, ``ids``, ``to_training``) or, for a pipeline without ``pack_flat``, a record
batch (``records``, ``lane_ids``, ``chunk_ids``). A pipeline with neither ``batch`` nor
a packer yields one ``SampleRecord`` (``meta``: ``SampleMeta``; ``payload``) at a time.
``SampleId`` names a sample.
"""
from __future__ import annotations

from .batch import Batch as SampleBatch
from .batch import SampleId, SampleMeta, SampleRecord

__all__ = ["SampleBatch", "SampleId", "SampleMeta", "SampleRecord"]
