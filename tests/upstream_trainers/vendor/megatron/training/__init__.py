"""Stub (ours) of megatron.training's globals: ``get_args`` / ``get_tokenizer`` return what
a test installed with ``set_args`` / ``set_tokenizer``; ``print_rank_0`` records lines in
``PRINTED`` (and prints them)."""
from __future__ import annotations

from typing import Any

_ARGS: Any = None
_TOKENIZER: Any = None
PRINTED: list[str] = []


def set_args(args: Any) -> None:
    global _ARGS
    _ARGS = args


def set_tokenizer(tokenizer: Any) -> None:
    global _TOKENIZER
    _TOKENIZER = tokenizer


def get_args() -> Any:
    assert _ARGS is not None, "test did not call megatron.training.set_args()"
    return _ARGS


def get_tokenizer() -> Any:
    assert _TOKENIZER is not None, "test did not call megatron.training.set_tokenizer()"
    return _TOKENIZER


def print_rank_0(message: str) -> None:
    PRINTED.append(message)
    print(message, flush=True)
