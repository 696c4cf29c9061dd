"""The batches a pipeline over record datasets gives, as digests: what tests/parquet and
tests/mds compare between a Parquet or MDS dataset and its JSONL twin."""
from __future__ import annotations

import hashlib

import numpy as np

import zephon


def batch_digests(datasets, socket: str, *, seed: int, chunk_size: int = 16, mixture=None,
                  tokenize: dict | None = None, limit: int | None = None) -> list[str]:
    """SHA-256 of each batch's tokens, for StaticMixtureWorkSource(datasets) [->
    tokenize(**tokenize)] -> pack_flat(65) -> batch(2) on the daemon at `socket`: every
    batch of one pass, or the first `limit`."""
    ws = zephon.StaticMixtureWorkSource(list(datasets), mixture=mixture, seed=seed,
                                        chunk_size=chunk_size)
    p = zephon.Pipeline(ws)
    if tokenize is not None:
        p = p.tokenize(**tokenize)
    p = p.pack_flat(max_length=65).batch(2).options(daemon=socket)
    out = []
    for b in p:
        out.append(hashlib.sha256(np.ascontiguousarray(b["tokens"]).tobytes()).hexdigest())
        if limit is not None and len(out) >= limit:
            break
    p.close()
    return out


def prompt_completion_batches(ds, socket: str, tokenizer: str, *,
                              seed: int) -> list[tuple[list, list]]:
    """Tokens and loss masks of every batch of StaticMixtureWorkSource([ds]) ->
    tokenize(field=["prompt", "completion"], loss_on=["completion"]) -> best_fit(257) ->
    batch(2): what tests/parquet and tests/mds compare between a record dataset of
    prompt/completion columns and its JSONL twin."""
    ws = zephon.StaticMixtureWorkSource([ds], seed=seed, chunk_size=16)
    pipe = (zephon.Pipeline(ws)
            .tokenize(tokenizer, field=["prompt", "completion"], loss_on=["completion"],
                      special_tokens="bos_eos", bos_token_id=1, eos_token_id=2)
            .pack_flat(257, algorithm="best_fit", num_bins=4, pad_token_id=0)
            .batch(2).options(daemon=socket, canonical_replicas=1))
    out = [(np.array(b["tokens"]).tolist(), np.array(b["loss_mask"]).tolist()) for b in pipe]
    pipe.close()
    return out
