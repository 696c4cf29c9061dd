"""Upstream's ``zephon.work`` import path: work sources and their helpers."""
from __future__ import annotations

from .static_mixture import MixtureSpec, StaticMixtureWorkSource, TokenEstimation
from ..sources import ScheduledMixtureWorkSource

__all__ = ["MixtureSpec", "ScheduledMixtureWorkSource", "StaticMixtureWorkSource",
           "TokenEstimation"]
