"""Stub (ours) of torchtitan.components.tokenizer.

zephon_dataloader reads only ``tokenizer.tokenizer_path`` (a local tokenizer file or
directory that Zephon loads itself)."""
from __future__ import annotations


class BaseTokenizer:
    def __init__(self, tokenizer_path: str | None = None):
        self.tokenizer_path = tokenizer_path
