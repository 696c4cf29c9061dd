"""Stub (ours) of torchtitan.components.data.loader.

zephon_dataloader subclasses ``BaseDataLoader`` and its nested ``Config`` (as a
``@dataclass(kw_only=True, slots=True)``), reads ``config.max_num_documents``, and names
``GrainDataLoader.Config`` as the target of its ``@override``. Nothing else is used."""
from __future__ import annotations

from dataclasses import dataclass


class BaseDataLoader:
    """The trainer's loader interface: iterable, with state_dict / load_state_dict."""

    @dataclass(kw_only=True, slots=True)
    class Config:
        max_num_documents: int | None = None
        """Upstream: cap on documents read; zephon_dataloader refuses it when set."""

    def __iter__(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def state_dict(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def load_state_dict(self, state_dict):  # pragma: no cover - overridden
        raise NotImplementedError


class GrainDataLoader(BaseDataLoader):
    """The stock text loader the override replaces; only its Config type is needed."""

    @dataclass(kw_only=True, slots=True)
    class Config(BaseDataLoader.Config):
        seed: int = 0
