"""Upstream's ``zephon.api`` import path."""
from __future__ import annotations

from ..pipeline import Pipeline

__all__ = ["Pipeline"]
