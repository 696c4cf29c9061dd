"""Writes the small Megatron corpus the example trainers read (two shards).

    python3 examples/make_corpus.py DIR [--vocab 64]
"""
from __future__ import annotations

import argparse
import os

import zephon
from zephon.corpus import synthetic_documents


def make_corpus(root: str, vocab: int = 64, num_docs: int = 1200) -> str:
    os.makedirs(root, exist_ok=True)
    docs = synthetic_documents(num_docs, seed=21, min_len=10, max_len=160, vocab=vocab)
    zephon.write_megatron_dataset(os.path.join(root, "a"), docs[: num_docs // 2])
    zephon.write_megatron_dataset(os.path.join(root, "b"), docs[num_docs // 2:])
    return root


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dir")
    p.add_argument("--vocab", type=int, default=64)
    a = p.parse_args()
    print(make_corpus(a.dir, a.vocab))
