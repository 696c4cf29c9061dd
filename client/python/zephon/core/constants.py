"""Upstream's older import path of the types iteration yields: the same classes as
:mod:`zephon.types` (isinstance checks through either path agree)."""
from __future__ import annotations

from ..types import SampleBatch, SampleId, SampleMeta, SampleRecord

__all__ = ["SampleBatch", "SampleId", "SampleMeta", "SampleRecord"]
