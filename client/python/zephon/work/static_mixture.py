"""``zephon.work.static_mixture`` as upstream names it, over zephon's work source.

``MixtureSpec`` (a dataset-name -> weight mapping) and ``TokenEstimation`` (weights are
token shares) are upstream's spellings of ``StaticMixtureWorkSource(mixture=...)`` and
``weight_by="tokens"``; passing them gives exactly the spec (and spec hash) of the
native spelling.
"""
from __future__ import annotations


from ..sources import MixtureSpec, StaticMixtureWorkSource, TokenEstimation

__all__ = ["MixtureSpec", "StaticMixtureWorkSource", "TokenEstimation"]
